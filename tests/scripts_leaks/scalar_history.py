"""Each step's loss kept as a detached 0-dim tensor for a plot at the end (never .item()):
one small tensor per step. `--items` keeps numbers (the clean run)."""
import sys

import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
items = "--items" in sys.argv
losses = []
for step in range(60):
    x = torch.randn(128, 64)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if items:
        losses.append(loss.item())
    else:
        losses.append(loss.detach())
print("first", round(float(losses[0]), 4), "last", round(float(losses[-1]), 4))
