"""A small CNN that uses only ops with MPS kernels (Linear, Conv2d, ReLU, CrossEntropy).

mpsprof should find no CPU fallback here, predicted or actual: a baseline to compare
the other examples with.

    python examples/mps_clean.py --steps 30
"""

from __future__ import annotations

import argparse
import os

import torch
from torch import nn


def pick_device() -> torch.device:
    """ML_DEVICE if set, else mps, else cuda, else cpu."""
    if os.environ.get("ML_DEVICE"):
        return torch.device(os.environ["ML_DEVICE"])
    if torch.backends.mps.is_available():
        return torch.device("mps")
    if torch.cuda.is_available():
        return torch.device("cuda")
    return torch.device("cpu")


class SmallCnn(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
        )  # fmt: skip
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(32 * 8 * 8, 64), nn.ReLU(), nn.Linear(64, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


def train(steps: int, device: torch.device, batch: int = 16) -> nn.Module:
    model = SmallCnn().to(device)
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for step in range(steps):
        x = torch.randn(batch, 3, 16, 16, device=device)
        y = torch.randint(0, 10, (batch,), device=device)
        loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 10 == 0 or step == steps - 1:
            print(f"step {step:4d}  loss {loss.detach().float():.4f}")
    return model


def main(argv: list[str] | None = None) -> nn.Module:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    args = parser.parse_args(argv)
    device = pick_device()
    print(f"device: {device}")
    return train(args.steps, device)


if __name__ == "__main__":
    main()
