"""The loss tensor summed under a key of a dict (``stats["loss"] = stats["loss"] + loss``, and
``self.stats["loss"] += loss`` in a logger object): every step's autograd graph stays alive.
``--item`` adds numbers (the clean twin); ``--logger`` sums in the logger's dict instead."""
import sys

import torch
from torch import nn


class Logger:
    def __init__(self) -> None:
        self.stats = {"loss": 0.0, "steps": 0}

    def log(self, loss: torch.Tensor) -> None:
        self.stats["steps"] += 1
        if "--item" in sys.argv:
            self.stats["loss"] += loss.item()
        else:
            self.stats["loss"] += loss


def train(steps: int = 40) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    stats = {"loss": 0.0}
    logger = Logger()
    for step in range(steps):
        x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if "--logger" in sys.argv:
            logger.log(loss)
        elif "--item" in sys.argv:
            stats["loss"] = stats["loss"] + loss.item()
        else:
            stats["loss"] = stats["loss"] + loss
    print(f"mean loss {float(stats['loss'] or logger.stats['loss']) / steps:.3f}")


if __name__ == "__main__":
    train()
