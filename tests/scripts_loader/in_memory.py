"""A small MLP fed from memory: a ``TensorDataset`` (or, with ``--list``, a Dataset over a
Python list of tensor pairs) through a DataLoader with ``num_workers=0``. Loading costs a few
microseconds a sample and never waits for I/O, so its loader needs no workers, on a busy
machine too.
"""

from __future__ import annotations

import argparse
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset


class PairList(Dataset):
    """Samples held as a list of (input, target) tensor pairs."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.items = list(zip(x, y, strict=True))

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int):
        return self.items[i]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--list", action="store_true", help="a list of tensor pairs, not a TensorDataset")
    parser.add_argument("--mark-dir", default=None, help="touch started / done here around the loop")
    args = parser.parse_args()
    torch.manual_seed(0)
    x, y = torch.randn(8192, 64), torch.randint(0, 10, (8192,))
    data = PairList(x, y) if args.list else TensorDataset(x, y)
    loader = DataLoader(data, batch_size=64, shuffle=True)
    model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    step = 0
    mark(args.mark_dir, "started")
    while step < args.steps:
        for xb, yb in loader:
            loss = nn.functional.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step >= args.steps:
                break
    mark(args.mark_dir, "done")
    print(f"loss {loss.item():.4f}")


def mark(folder: str | None, name: str) -> None:
    """Tell a test that the training loop starts or ends (it keeps the CPU busy meanwhile)."""
    if folder:
        open(os.path.join(folder, name), "w").close()


if __name__ == "__main__":
    main()
