"""A loader of 4 workers that each compute and wait per sample (decode, then a read), the
steps waiting for them. Where the workers outnumber the free cores they queue for them,
several at once: their run-queue time, summed over the workers, outgrows the wall time
of a batch, while the training waits for one batch at a time.

    python parallel_workers.py [--workers 4] [--cpu-ms 1.0] [--sleep-ms 2.0] [--one-core]

``--one-core`` keeps the workers on one core (``os.sched_setaffinity`` in
``worker_init_fn``, Linux), as a container limited to one core would: they queue for it
whatever else the machine runs.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class DecodeThenRead(Dataset):
    def __init__(self, n: int, cpu_s: float, sleep_s: float) -> None:
        self.n, self.cpu_s, self.sleep_s = n, cpu_s, sleep_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        until = time.thread_time() + self.cpu_s  # the decode: CPU work, however long it queues
        k = 0
        while time.thread_time() < until:
            k += 1
        time.sleep(self.sleep_s)  # the read: off the CPU
        return torch.full((64,), float(i % 7)), torch.tensor(float(i % 2))


def one_core(_: int) -> None:
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--cpu-ms", type=float, default=1.0)
    parser.add_argument("--sleep-ms", type=float, default=2.0)
    parser.add_argument("--one-core", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    data = DecodeThenRead(args.steps * args.batch_size, args.cpu_ms / 1e3, args.sleep_ms / 1e3)
    loader = DataLoader(data, batch_size=args.batch_size, num_workers=args.workers,
                        worker_init_fn=one_core if args.one_core else None)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x).squeeze(1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
