"""Evaluate the untrained model over the whole validation set first (the baseline accuracy),
then train, evaluating after each epoch.

Env: MANUAL=1 updates the parameters by hand (no optimizer: backward passes count the steps).
Prints ``baseline acc A over N batches`` and ``updates N``.
"""

import os

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

MANUAL = os.environ.get("MANUAL") == "1"


def evaluate(model, loader):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for xb, yb in loader:
            correct += (model(xb).argmax(1) == yb).sum().item()
            total += len(yb)
    model.train()
    return correct / total


def main():
    torch.manual_seed(0)
    x = torch.randn(2400, 16)
    y = (x[:, 0] + x[:, 1] > 0).long()
    train = DataLoader(TensorDataset(x[:960], y[:960]), batch_size=32, shuffle=True)
    val = DataLoader(TensorDataset(x[960:], y[960:]), batch_size=16)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))
    opt = None if MANUAL else torch.optim.SGD(model.parameters(), lr=0.1)
    print(f"baseline acc {evaluate(model, val):.3f} over {len(val)} batches")
    updates = 0
    for epoch in range(2):
        for xb, yb in train:
            loss = nn.functional.cross_entropy(model(xb), yb)
            model.zero_grad()
            loss.backward()
            if opt is not None:
                opt.step()
            else:
                with torch.no_grad():
                    for p in model.parameters():
                        p -= 0.1 * p.grad
            updates += 1
        print(f"epoch {epoch} acc {evaluate(model, val):.3f}")
    print(f"updates {updates}")


if __name__ == "__main__":
    main()
