"""DP-SGD style training: per-sample gradients from torch.func (vmap over grad), clipped per
sample, summed into ``p.grad`` by hand over 4 micro-batches, then one optimizer step.

torch.func.grad runs the autograd engine once per micro-batch (on functorch's wrapped
tensors): those passes are no steps, and the per-sample loss under vmap cannot be read.
"""
import torch
from torch import nn
from torch.func import functional_call, grad, vmap

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))


def loss_of(params, x, y):
    out = functional_call(model, params, (x.unsqueeze(0),))
    return nn.functional.cross_entropy(out, y.unsqueeze(0))


per_sample = vmap(grad(loss_of), in_dims=(None, 0, 0))
x_all, y_all = torch.randn(640, 16), torch.randint(0, 4, (640,))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
accum, micro, updates = 4, 0, 0
for i in range(0, len(x_all), 32):
    x, y = x_all[i:i + 32], y_all[i:i + 32]
    grads = per_sample({k: v.detach() for k, v in model.named_parameters()}, x, y)
    norms = torch.sqrt(sum(g.flatten(1).pow(2).sum(1) for g in grads.values()))
    scale = (1.0 / (norms + 1e-6)).clamp(max=1.0)
    for name, p in model.named_parameters():
        clipped = (grads[name] * scale.view(-1, *[1] * (grads[name].dim() - 1))).sum(0) / len(x)
        p.grad = clipped if p.grad is None else p.grad + clipped
    micro += 1
    if micro % accum == 0:
        opt.step()
        opt.zero_grad(set_to_none=True)
        updates += 1
with torch.no_grad():
    print("loss", round(nn.functional.cross_entropy(model(x_all), y_all).item(), 4))
print("optimizer steps", updates)
