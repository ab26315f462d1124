"""A training loop that uses three ops without an MPS kernel.

``nn.MultiLabelMarginLoss``, ``torch.pdist`` and ``nn.AdaptiveMaxPool3d`` have no MPS
kernel in any torch from 2.1 to 2.15 (native_functions.yaml), so they run on the CPU on a Mac:
with PYTORCH_ENABLE_MPS_FALLBACK=1 (set before torch is imported) each call copies its
tensors to the CPU and back; without it they raise NotImplementedError. PyTorch warns
about the first one only; mpsprof counts every call and names the module and line.

    PYTORCH_ENABLE_MPS_FALLBACK=1 python examples/fallback_ops.py --steps 30
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("PYTORCH_ENABLE_MPS_FALLBACK", "1")  # read once, when torch loads

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


class VolumeEncoder(nn.Module):
    """3-D conv features pooled to a fixed grid (AdaptiveMaxPool3d)."""

    def __init__(self, channels: int = 4, hidden: int = 16) -> None:
        super().__init__()
        self.conv = nn.Conv3d(1, channels, kernel_size=3, padding=1)
        self.pool = nn.AdaptiveMaxPool3d((2, 2, 2))
        self.fc = nn.Linear(channels * 8, hidden)

    def forward(self, volume: torch.Tensor) -> torch.Tensor:
        return self.fc(self.pool(torch.relu(self.conv(volume))).flatten(1))


class TagHead(nn.Module):
    """Scores for each of ``tags`` labels; a sample may carry several (multi-label)."""

    def __init__(self, hidden: int = 16, tags: int = 6) -> None:
        super().__init__()
        self.score = nn.Linear(hidden, tags)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.score(z)


class SpreadPenalty(nn.Module):
    """Pushes embeddings apart: pairwise distances with torch.pdist."""

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return torch.exp(-torch.pdist(z)).mean()


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = VolumeEncoder()
        self.head = TagHead()
        self.spread = SpreadPenalty()

    def forward(self, volume: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = self.encoder(volume)
        return self.head(z), self.spread(z)


def train(steps: int, device: torch.device, batch: int = 6) -> nn.Module:
    model = Model().to(device)
    tagging = nn.MultiLabelMarginLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for step in range(steps):
        volume = torch.randn(batch, 1, 6, 6, 6, device=device)
        # each sample's tag indices, then -1: the loss's target format
        tags = torch.randint(0, 6, (batch, 3), device=device)
        tags = torch.cat([tags, torch.full((batch, 3), -1, device=device)], dim=1)
        scores, penalty = model(volume)
        loss = tagging(scores, tags) + 0.1 * penalty
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 10 == 0 or step == steps - 1:
            print(f"step {step:4d}  loss {loss.item():.4f}")
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
