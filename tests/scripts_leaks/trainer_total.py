"""A trainer class that sums the loss tensor in an attribute (``self.total += loss``, not
``loss.item()``): every step's autograd graph is chained to the last and stays alive.
``--item`` adds numbers (the clean twin). The trainer also holds the model, the optimizer
(its state), the last output, the best loss and a metric's detached state, each replaced or
owned, none growing."""
import sys

import torch
from torch import nn


class MeanMetric:
    """A torchmetrics-style running mean: its state is detached, so it keeps no graph."""

    def __init__(self) -> None:
        self.state = {"sum": torch.zeros(()), "count": torch.zeros(())}

    def update(self, value: torch.Tensor) -> None:
        self.state["sum"] = self.state["sum"] + value.detach()
        self.state["count"] += 1


class Trainer:
    def __init__(self) -> None:
        torch.manual_seed(0)
        self.model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.total = 0.0
        self.best = None
        self.last_out = None
        self.metric = MeanMetric()
        self.item = "--item" in sys.argv

    def step(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = self.model(x)
        loss = nn.functional.cross_entropy(out, y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        self.last_out = out
        self.metric.update(loss)
        self.best = loss if self.best is None or loss.item() < self.best.item() else self.best
        if self.item:
            self.total += loss.item()
        else:
            self.total += loss
        return loss

    def fit(self, steps: int) -> None:
        for step in range(steps):
            x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))
            self.step(x, y)
        print(f"mean loss {float(self.total) / steps:.3f}")


if __name__ == "__main__":
    Trainer().fit(40)
