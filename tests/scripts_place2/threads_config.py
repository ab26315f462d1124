"""The script sets torch's threads to twice the CPUs in a config function called from main()."""

from __future__ import annotations

import os
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Squares(Dataset):
    def __len__(self) -> int:
        return 4096

    def __getitem__(self, i: int):
        x = torch.randn(256, 256)
        return (x @ x).sum(0)[:64]  # CPU work per sample, in the workers


def configure() -> dict[str, int]:
    torch.set_num_threads(2 * (os.cpu_count() or 1))  # "hyper-threads": twice the CPUs
    return {"batch": 16}


def main(steps: int) -> None:
    cfg = configure()
    torch.manual_seed(0)
    loader = DataLoader(Squares(), batch_size=cfg["batch"], num_workers=2)
    model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step, x in enumerate(loader):
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step + 1 >= steps:
            break
    print("done")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 40)
