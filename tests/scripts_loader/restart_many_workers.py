"""8 forked workers, not persistent, over short epochs: each serves 2 batches per epoch.

A sample sleeps 2 ms (a file read) and computes 0.3 ms (a decode), so a batch of 16 is
mostly waiting: 8 workers hide it. Started again at every epoch, each worker's start-up
(its first touches of the forked process's memory, its fetcher) is CPU time spread over its
2 batches; read as the batches' work it made the loader "need more CPU than this machine
has" and be told to use fewer workers (sweep t11), which made the run slower. The fix that
holds is ``persistent_workers=True`` with the 8 workers kept.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Reads(Dataset):
    def __len__(self) -> int:
        return 256

    def __getitem__(self, i: int):
        time.sleep(0.002)  # read the file
        until = time.thread_time() + 0.0003  # decode: CPU work
        while time.thread_time() < until:
            pass
        return torch.randn(3, 16, 16), i % 4


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=4)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(768, 64), nn.ReLU(), nn.Linear(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = DataLoader(Reads(), batch_size=16, shuffle=True, num_workers=8, multiprocessing_context="fork")
    for _ in range(args.epochs):
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()


if __name__ == "__main__":
    main()
