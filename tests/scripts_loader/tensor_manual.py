"""A manual-SGD regression over an in-memory TensorDataset: no optimizer, small steps.
Indexing a tensor one sample at a time is all the loader does; workers would not help.
"""

from __future__ import annotations

import argparse

import torch
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    torch.manual_seed(0)
    x = torch.randn(512, 8)
    y = x @ torch.arange(1.0, 9.0) + 0.1 * torch.randn(512)
    loader = DataLoader(TensorDataset(x, y), batch_size=args.batch_size, shuffle=True)
    w = torch.zeros(8, requires_grad=True)
    for epoch in range(args.epochs):
        for xb, yb in loader:
            loss = ((xb @ w - yb) ** 2).mean()
            loss.backward()
            with torch.no_grad():
                w -= 0.05 * w.grad
                w.grad.zero_()
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
