"""A list that keeps a detached copy of every batch's activations: it grows forever."""
import argparse
import collections

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=24)
parser.add_argument("--device", default="cpu")
parser.add_argument("--bounded", action="store_true", help="keep the last 8 batches only (the fix)")
args = parser.parse_args()
torch.manual_seed(0)
device = torch.device(args.device)
encoder = nn.Sequential(nn.Linear(64, 256), nn.ReLU()).to(device)
head = nn.Linear(256, 4).to(device)
opt = torch.optim.Adam([*encoder.parameters(), *head.parameters()], lr=1e-3)
cache = collections.deque(maxlen=8) if args.bounded else []
for step in range(args.steps):
    x = torch.randn(128, 64, device=device)
    y = torch.randint(0, 4, (128,), device=device)
    h = encoder(x)
    cache.append(h.detach().clone())
    loss = nn.functional.cross_entropy(head(h), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"cached {len(cache)} batches")
