"""The classic leak: `total_loss += loss` without .item() chains every step's graph."""
import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=24)
parser.add_argument("--fixed", action="store_true", help="accumulate loss.item() instead")
parser.add_argument("--device", default="cpu")
args = parser.parse_args()
torch.manual_seed(0)
device = torch.device(args.device)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
total_loss = 0.0
for step in range(args.steps):
    x, y = torch.randn(16, 32, device=device), torch.randint(0, 4, (16,), device=device)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if args.fixed:
        total_loss += loss.item()
    else:
        total_loss += loss
print(f"mean loss {float(total_loss) / args.steps:.3f}")
