"""pytorch/examples-style training whose Dataset sleeps 5 ms per sample (a slow disk or
network read): the loader waits, it does not compute. Used to check that mpsprof sizes
num_workers from the waiting, not from the cores, and for the bare A/B of its advice.

    python sleep_per_sample.py --workers 0      # the loading is in the training process
    python sleep_per_sample.py --workers 6      # what mpsprof suggests on a 2-core machine
    python sleep_per_sample.py --accum 4        # gradient accumulation: a step every 4 batches
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class SlowReads(Dataset):
    def __init__(self, n: int, sleep_s: float, dim: int) -> None:
        self.n, self.sleep_s, self.dim = n, sleep_s, dim

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        time.sleep(self.sleep_s)  # the read: blocked, not computing
        g = torch.Generator().manual_seed(i)
        return torch.randn(self.dim, generator=g), torch.tensor(float(i % 2))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--sleep-ms", type=float, default=5.0)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--accum", type=int, default=1, help="batches per optimizer step")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(args.dim, args.dim), nn.ReLU(), nn.Linear(args.dim, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    data = SlowReads(args.steps * args.batch_size, args.sleep_ms / 1000.0, args.dim)
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=True, num_workers=args.workers,
                        persistent_workers=args.workers > 0)
    started = time.perf_counter()
    updates = 0
    for i, (x, y) in enumerate(loader):
        loss = nn.functional.mse_loss(model(x).squeeze(1), y) / args.accum
        loss.backward()
        if (i + 1) % args.accum == 0:
            opt.step()
            opt.zero_grad()
            updates += 1
    print(f"trained {args.steps} batches, {updates} updates in {time.perf_counter() - started:.2f} s "
          f"(num_workers={args.workers})")


if __name__ == "__main__":
    main()
