"""A progress line with a smoothed loss, kept as an exponential moving average of the loss
tensor (no ``.item()``, no ``.detach()``): the average's graph reaches back through every
step's graph, a leak the line of the average holds.

    python smoothed_loss.py [--steps 40]
"""
import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=40)
args = parser.parse_args()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
smooth = None
for step in range(args.steps):
    x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    smooth = loss if smooth is None else 0.98 * smooth + 0.02 * loss
    if step % 10 == 0:
        print(f"step {step}: smoothed loss {float(smooth):.4f}")
print(f"final smoothed loss {float(smooth):.4f}")
