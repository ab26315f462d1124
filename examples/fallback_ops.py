"""A training loop that uses three ops without an MPS kernel.

``nn.CTCLoss``, ``torch.pdist`` and ``nn.AdaptiveMaxPool3d`` run on the CPU on a Mac:
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


class SequenceHead(nn.Module):
    def __init__(self, hidden: int = 16, frames: int = 12, classes: int = 6) -> None:
        super().__init__()
        self.frames = frames
        self.expand = nn.Linear(hidden, frames * classes)
        self.classes = classes

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        logits = self.expand(z).view(z.shape[0], self.frames, self.classes)
        return logits.transpose(0, 1).log_softmax(-1)  # (time, batch, classes)


class SpreadPenalty(nn.Module):
    """Pushes embeddings apart: pairwise distances with torch.pdist."""

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return torch.exp(-torch.pdist(z)).mean()


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = VolumeEncoder()
        self.head = SequenceHead()
        self.spread = SpreadPenalty()

    def forward(self, volume: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = self.encoder(volume)
        return self.head(z), self.spread(z)


def train(steps: int, device: torch.device, batch: int = 6) -> nn.Module:
    model = Model().to(device)
    ctc = nn.CTCLoss(zero_infinity=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for step in range(steps):
        volume = torch.randn(batch, 1, 6, 6, 6, device=device)
        targets = torch.randint(1, 6, (batch, 4), device=device)
        in_len = torch.full((batch,), 12, dtype=torch.long, device=device)
        tgt_len = torch.full((batch,), 4, dtype=torch.long, device=device)
        log_probs, penalty = model(volume)
        loss = ctc(log_probs, targets, in_len, tgt_len) + 0.1 * penalty
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
