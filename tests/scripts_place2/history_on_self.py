"""A trainer class keeps a plain tensor (no autograd history) of every step in self.history."""

from __future__ import annotations

import sys

import torch
from torch import nn


class Trainer:
    def __init__(self) -> None:
        torch.manual_seed(0)
        self.model = nn.Linear(128, 128)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.history = []

    def step(self, x: torch.Tensor) -> None:
        out = self.model(x)
        loss = out.pow(2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        with torch.no_grad():
            snapshot = out.detach() * 1.0
        self.history.append(snapshot)

    def fit(self, steps: int) -> None:
        for _ in range(steps):
            self.step(torch.randn(256, 128))
        print(f"kept {len(self.history)}")


if __name__ == "__main__":
    Trainer().fit(int(sys.argv[1]) if len(sys.argv) > 1 else 500)
