"""A training loop that uses what a profiler could disturb: the script's own warning
filters and showwarning, torch.set_warn_always, its own TorchDispatchMode, module hooks
(per module and global) and threads. Everything it observes is printed."""
import threading
import warnings

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

torch.manual_seed(0)

# -- warnings: filters, a custom showwarning, C++ warnings shown every time --------
warnings.filterwarnings("ignore", message="hidden.*")
warnings.warn("hidden: filtered by the script")
original_showwarning = warnings.showwarning


def my_showwarning(message, category, filename, lineno, file=None, line=None):
    print("my showwarning:", category.__name__, message, lineno)


warnings.showwarning = my_showwarning
warnings.warn("shown by the script's own showwarning")
warnings.showwarning = original_showwarning
torch.set_warn_always(True)
cube = torch.ones(2, 3, 4)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for _ in range(3):
        cube.T  # TORCH_WARN_ONCE in C++, shown every time with set_warn_always
print("caught", len(caught), sorted({str(w.message)[:40] for w in caught}))
cube.T  # shown on stderr by the default showwarning


# -- the script's own dispatch mode, module hooks and a global hook ----------------
class CountingMode(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func.overloadpacket)
        self.ops[name] = self.ops.get(name, 0) + 1
        return func(*args, **(kwargs or {}))


model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
forward_calls = []
model[0].register_forward_hook(lambda m, i, o: forward_calls.append(tuple(o.shape)))
global_calls = []
handle = nn.modules.module.register_module_forward_hook(lambda m, i, o: global_calls.append(type(m).__name__))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x = torch.randn(16, 4)
y = x.sum(dim=1, keepdim=True)
mode_counts = []
for step in range(10):
    opt.zero_grad()
    if 2 <= step <= 6:
        with CountingMode() as mode:
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
        mode_counts.append(sum(mode.ops.values()))
    else:
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
    opt.step()
handle.remove()
print("loss", f"{loss.item():.6f}")
print("mode op counts", mode_counts)
print("forward hook", len(forward_calls), forward_calls[0])
print("global hook", len(global_calls), sorted(set(global_calls)))

# -- threads: work and print from several threads, joined in order -----------------
results = {}


def worker(n):
    t = torch.full((8, 8), float(n))
    results[n] = float((t @ t).sum())


threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("threads", [results[n] for n in range(4)])
