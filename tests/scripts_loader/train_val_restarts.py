"""A training and a validation loader, 2 workers each, validated after every short epoch
(timm's train.py layout): without ``persistent_workers`` every pass over either loader
starts its workers again. With ``--start spawn`` (macOS's default, set for the process as a
Mac user's script would run) each start is a new Python importing torch and this script,
and the batches are cheap: the waiting is the start-ups of both loaders, not loading.
``--persistent`` keeps both loaders' workers.
"""

from __future__ import annotations

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Vectors(Dataset):
    """``n`` random vectors and their classes: a few microseconds a sample."""

    def __init__(self, n: int) -> None:
        self.x, self.y = torch.randn(n, 32), torch.arange(n) % 4

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        return self.x[i], self.y[i]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--start", default="spawn")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--persistent", action="store_true")
    args = parser.parse_args()
    torch.multiprocessing.set_start_method(args.start)
    torch.manual_seed(0)
    model = nn.Linear(32, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    train_loader = DataLoader(Vectors(96), batch_size=8, shuffle=True, num_workers=2,
                              persistent_workers=args.persistent)
    val_loader = DataLoader(Vectors(32), batch_size=16, num_workers=2,
                            persistent_workers=args.persistent)
    for epoch in range(args.epochs):
        model.train()
        for x, y in train_loader:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.eval()
        correct = 0
        with torch.no_grad():
            for x, y in val_loader:
                correct += int((model(x).argmax(1) == y).sum())
        print(f"epoch {epoch}: val acc {correct / len(val_loader.dataset):.2f}")


if __name__ == "__main__":
    main()
