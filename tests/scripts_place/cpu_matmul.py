"""A CPU training whose steps are intra-op parallel matmuls (no DataLoader)."""

from __future__ import annotations

import sys
import time

import torch

torch.manual_seed(0)
w = torch.randn(384, 384, requires_grad=True)
opt = torch.optim.SGD([w], lr=1e-4)
t0 = time.perf_counter()
for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 200):
    x = torch.randn(384, 384)
    loss = (x @ w @ w).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"{time.perf_counter() - t0:.2f} s")
