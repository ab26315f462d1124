"""A training loop with a fast training loader and a slow validation loader read after
each epoch: the waiting is the evaluation's, between the steps, not a training step's.

    python slow_val_loader.py --epochs 3
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset


class SlowVal(Dataset):
    def __init__(self, n: int = 128) -> None:
        self.x = torch.randn(n, 20)
        self.y = torch.randint(0, 3, (n,))

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        time.sleep(0.004)  # a slow read, per sample
        return self.x[i], self.y[i]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    train_loader = DataLoader(TensorDataset(torch.randn(4096, 20), torch.randint(0, 3, (4096,))), batch_size=128)
    val_loader = DataLoader(SlowVal(), batch_size=32)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(args.epochs):
        for x, y in train_loader:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            correct = sum(int((model(x).argmax(1) == y).sum()) for x, y in val_loader)
        print(f"epoch {epoch} val acc {correct / len(val_loader.dataset):.3f}")


if __name__ == "__main__":
    main()
