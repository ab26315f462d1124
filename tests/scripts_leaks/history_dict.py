"""A training history kept in a dict of lists: `history["out"].append(out)` keeps every
step's output with its graph (the line that keeps the memory is the append, not the model
call); `--items` keeps numbers instead (the clean run)."""
import collections
import sys

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
history = collections.defaultdict(list)
items = "--items" in sys.argv
for step in range(40):
    x = torch.randn(32, 64)
    out = model(x)
    loss = ((out - x) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if items:
        history["out"].append(out.mean().item())
    else:
        history["out"].append(out)
    history["step"].append(step)
print("steps", len(history["step"]), "kept", len(history["out"]))
