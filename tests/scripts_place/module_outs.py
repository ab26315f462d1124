"""Lightning-style: the training step keeps its logits in ``self.outs`` (with their graphs)."""

from __future__ import annotations

import torch
from torch import nn


class Task:
    def __init__(self) -> None:
        self.model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 8))
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.outs = []

    def training_step(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        logits = self.model(x)
        self.outs.append(logits)
        return nn.functional.cross_entropy(logits, y)

    def fit(self, steps: int) -> None:
        for _ in range(steps):
            loss = self.training_step(torch.randn(64, 64), torch.randint(0, 8, (64,)))
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
        print(f"kept {len(self.outs)}")


if __name__ == "__main__":
    torch.manual_seed(0)
    Task().fit(240)
