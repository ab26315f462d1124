"""A small speech-style model: GRU encoder + CTC loss on synthetic sequences.

In a torch without MPS kernels for CTC loss (2.13 has none; 2.14.1's native_functions.yaml
has ``MPS: ctc_loss_mps``) a Mac runs it on the CPU (with PYTORCH_ENABLE_MPS_FALLBACK=1) and
mpsprof points at it; with them it runs on the GPU.
Its many small ops per step make it the worst case for op accounting's overhead. Runs in a
few seconds on a CPU.

    python examples/ctc_gru.py --steps 40
    ML_DEVICE=cpu mpsprof run examples/ctc_gru.py
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


class GruCtc(nn.Module):
    def __init__(self, features: int = 20, hidden: int = 48, classes: int = 12) -> None:
        super().__init__()
        self.proj = nn.Linear(features, hidden)
        self.encoder = nn.GRU(hidden, hidden, num_layers=2, batch_first=False)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, _ = self.encoder(torch.relu(self.proj(x)))
        return self.head(h).log_softmax(dim=-1)  # (time, batch, classes)


def make_batch(device: torch.device, batch: int = 8, frames: int = 40, labels: int = 10,
               features: int = 20, classes: int = 12) -> tuple[torch.Tensor, ...]:  # fmt: skip
    x = torch.randn(frames, batch, features, device=device)
    targets = torch.randint(1, classes, (batch, labels), device=device)
    input_lengths = torch.full((batch,), frames, dtype=torch.long, device=device)
    target_lengths = torch.randint(labels // 2, labels + 1, (batch,), dtype=torch.long, device=device)
    return x, targets, input_lengths, target_lengths


def train(steps: int, device: torch.device) -> nn.Module:
    model = GruCtc().to(device)
    ctc = nn.CTCLoss(blank=0, zero_infinity=True)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for step in range(steps):
        x, targets, in_len, tgt_len = make_batch(device)
        loss = ctc(model(x), targets, in_len, tgt_len)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 10 == 0 or step == steps - 1:
            print(f"step {step:4d}  loss {loss.item():.4f}")
    return model


def main(argv: list[str] | None = None) -> nn.Module:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args(argv)
    device = pick_device()
    print(f"device: {device}")
    return train(args.steps, device)


if __name__ == "__main__":
    main()
