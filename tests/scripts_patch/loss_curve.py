"""A loss curve kept as tensors: every step's detached loss appended to a list.

No graph is kept (the loss is detached, as Lightning hands it to a callback), so only
small tensors pile up (leak-site-small). The curve is the user's data: its length is
printed at the end, and a fix must keep every value (``.item()``), not the last 100.
"""
import sys

import torch
from torch import nn


class LossCurve:
    def __init__(self):
        self.curve = []

    def on_step_end(self, loss):
        self.curve.append(loss)


torch.manual_seed(0)
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 160
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
cb = LossCurve()
for step in range(steps):
    x = torch.randn(16, 32)
    loss = nn.functional.mse_loss(model(x).squeeze(-1), x[:, 0])
    opt.zero_grad()
    loss.backward()
    opt.step()
    cb.on_step_end(loss.detach())
    if step % 10 == 0:
        print(f"step {step} loss {loss.item():.4f}")
print("curve", len(cb.curve), f"mean {sum(cb.curve) / len(cb.curve):.4f}")
