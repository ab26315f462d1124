"""A script that sets torch's thread count itself (``torch.set_num_threads(N)``, one per
core, as CPU-training recipes do) and whose Dataset computes its augmentation per sample
in the training process (``num_workers=0``). Workers beside N busy intra-op threads only
take turns with them: the fix gives the workers cores and torch fewer threads.

    python threads_and_transforms.py --threads 2     # on a 2-core machine
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser()
parser.add_argument("--threads", type=int, default=2)
parser.add_argument("--workers", type=int, default=0)
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--cpu-ms", type=float, default=1.5, help="augmentation CPU time per sample")
args = parser.parse_args(sys.argv[1:])
torch.set_num_threads(args.threads)


class Augmented(Dataset):
    def __init__(self, n: int, cpu_s: float) -> None:
        self.n, self.cpu_s = n, cpu_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        until = time.thread_time() + self.cpu_s  # the transform: CPU work
        while time.thread_time() < until:
            pass
        g = torch.Generator().manual_seed(i)
        return torch.randn(256, generator=g), i % 10


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loader = DataLoader(Augmented(args.steps * 16, args.cpu_ms / 1000.0), batch_size=16, shuffle=True,
                        num_workers=args.workers)
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"done: {args.steps} steps with {args.threads} threads and {args.workers} workers")


if __name__ == "__main__":
    main()
