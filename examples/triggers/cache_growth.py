"""Trigger for `cache-growth` (MPS or CUDA): every batch has a new sequence length.

The tensors of one step are freed after it, so memory held by tensors stays flat, but
the device allocator keeps a cached buffer for every size it has seen: its cache (MPS
driver memory, CUDA reserved memory) grows through the run. Bucketing the lengths and
`empty_cache()` are the fixes mpsprof names. On a CPU-only machine nothing is cached and
the rule does not apply.

    mpsprof run examples/triggers/cache_growth.py --steps 600
"""

from __future__ import annotations

import argparse

import torch
from torch import nn


def pick_device() -> torch.device:
    if torch.backends.mps.is_available():
        return torch.device("mps")
    if torch.cuda.is_available():
        return torch.device("cuda")
    return torch.device("cpu")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=600)
    args = parser.parse_args()
    device = pick_device()
    model = nn.Sequential(nn.Linear(256, 1024), nn.GELU(), nn.Linear(1024, 256)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for step in range(args.steps):
        length = 64 + 7 * step  # a new shape at every step: nothing is reused
        x = torch.randn(8, length, 256, device=device)
        loss = model(x).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
