"""A script written on a Mac: the device is named once, as a string (run elsewhere, torch
has no MPS)."""
import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=5)
args = parser.parse_args()

device = torch.device("mps")  # the Mac's GPU
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(args.steps):
    x = torch.randn(32, 8, device=device)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if device.type == "mps":  # a comparison: not a place that chooses the device
        pass
print(f"done {loss.item():.3f}")
