"""Trigger for `oom-crash-mps` / `oom-crash-cuda` / `oom-crash-cpu`: a batch far too large.

The batch size is set as if the machine had unlimited memory: the first forward asks
for terabytes and the allocator refuses at once ("MPS backend out of memory", "CUDA out
of memory", or "DefaultCPUAllocator: can't allocate memory"). Nothing is actually
allocated, so the script is safe to run anywhere.
"""

from __future__ import annotations

import torch
from torch import nn


def pick_device() -> torch.device:
    if torch.backends.mps.is_available():
        return torch.device("mps")
    if torch.cuda.is_available():
        return torch.device("cuda")
    return torch.device("cpu")


def main() -> None:
    device = pick_device()
    model = nn.Linear(64, 4096).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for batch_size in (32, 1 << 30):  # one sane step, then a typo'd batch size
        x = torch.empty(batch_size, 64, device=device).normal_()  # 1 << 30 rows: 256 GiB
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
