"""A Dataset that returns torch.from_numpy of a float64 NumPy array: the model gets float64."""

from __future__ import annotations

import sys

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Table(Dataset):
    def __init__(self) -> None:
        self.rows = np.random.default_rng(0).standard_normal((2048, 16))

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int):
        x = torch.from_numpy(self.rows[i])
        return x, x.sum()


def main(steps: int) -> None:
    torch.manual_seed(0)
    model = nn.Linear(16, 1).double()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Table(), batch_size=32, shuffle=True)
    for step, (x, y) in enumerate(loader):
        loss = ((model(x).squeeze(1) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step + 1 >= steps:
            break
    print("done")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 40)
