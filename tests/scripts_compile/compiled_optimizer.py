"""The optimizer step compiled (PyTorch's "Compiling the optimizer" recipe): Dynamo traces
``Optimizer.step`` with the global optimizer hooks it finds there.

argv: BACKEND (plain python cannot compile it with fullgraph=True: record_function).
"""
import logging
import sys

import torch

torch._logging.set_logs(dynamo=logging.ERROR)  # torch's own log line carries a time and a pid
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
opt = torch.optim.Adam(model.parameters(), lr=0.01)


@torch.compile(backend=sys.argv[1])
def opt_step() -> None:
    opt.step()


x, y = torch.randn(16, 8), torch.randn(16, 1)
for step in range(7):
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt_step()
    opt.zero_grad()
    print(f"step {step}: loss {loss.item():.6f}")
