"""Short epochs over a DataLoader whose 2 workers are not persistent: each epoch starts them
again. With ``--context spawn`` (macOS's default) each start is a new Python importing torch
and this script, and the batches are cheap: the waiting is the start-ups. With ``--context
fork`` and ``--cpu-ms`` each sample costs CPU work: the waiting is the loading.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Samples(Dataset):
    def __init__(self, cpu_s: float) -> None:
        self.cpu_s = cpu_s

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int):
        until = time.thread_time() + self.cpu_s  # CPU work, whatever else runs on the core
        while time.thread_time() < until:
            pass
        return torch.randn(32), i % 4


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--context", default="spawn")
    parser.add_argument("--cpu-ms", type=float, default=0.0)
    parser.add_argument("--epochs", type=int, default=6)
    args = parser.parse_args()
    model = nn.Linear(32, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(Samples(args.cpu_ms / 1000.0), batch_size=8, num_workers=2,
                        multiprocessing_context=args.context)
    for _ in range(args.epochs):
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()


if __name__ == "__main__":
    main()
