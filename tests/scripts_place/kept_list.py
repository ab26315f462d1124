"""A plain tensor (no autograd history) kept in a module-level list every 5th step:
memory grows, and the line that keeps it is the ``kept.append(feats)`` in train()."""

from __future__ import annotations

import torch
from torch import nn

kept = []


def train(steps: int) -> None:
    torch.manual_seed(0)
    model = nn.Linear(256, 256)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(steps):
        x = torch.randn(512, 256)
        with torch.no_grad():
            feats = x * 2.0
        if step % 5 == 0:
            kept.append(feats)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"kept {len(kept)}")


if __name__ == "__main__":
    import sys

    train(int(sys.argv[1]) if len(sys.argv) > 1 else 400)
