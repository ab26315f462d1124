"""pytorch/examples-style training whose two workers each spend 4 ms of CPU per sample
(decoding, augmenting): the loader computes. On a 2-core machine the workers and the
training cannot all run at once, so more workers cannot hide the loading.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class HeavyTransforms(Dataset):
    def __init__(self, n: int, cpu_s: float) -> None:
        self.n, self.cpu_s = n, cpu_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        x = torch.zeros(64)
        until = time.thread_time() + self.cpu_s  # CPU work, whatever else runs on the core
        k = 0
        while time.thread_time() < until:
            k += 1
        return x + float(i % 7), torch.tensor(float(i % 2))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--cpu-ms", type=float, default=4.0)
    parser.add_argument("--compute-ms", type=float, default=3.0)
    args = parser.parse_args()
    model = nn.Linear(64, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    data = HeavyTransforms(args.steps * args.batch_size, args.cpu_ms / 1000.0)
    loader = DataLoader(data, batch_size=args.batch_size, num_workers=args.workers,
                        persistent_workers=args.workers > 0)
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x).squeeze(1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        until = time.thread_time() + args.compute_ms / 1000.0  # the rest of the model's step
        while time.thread_time() < until:
            pass
    print("done")


if __name__ == "__main__":
    main()
