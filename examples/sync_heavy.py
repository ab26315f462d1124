"""A loop that stops the GPU many times per step: ``.item()`` on every gradient norm.

Each ``.item()`` makes the host wait until the device has finished all queued work, so
the CPU can no longer run ahead and queue the next kernels. mpsprof counts the syncs per
step and points at the line; on a CPU-only machine it reports what a Mac would pay.

    python examples/sync_heavy.py --steps 30
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


def build_model(device: torch.device) -> nn.Module:
    return nn.Sequential(
        nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)
    ).to(device)


def grad_norms(model: nn.Module) -> dict[str, float]:
    """The anti-pattern: one host-device sync per parameter."""
    norms = {}
    for name, param in model.named_parameters():
        norms[name] = param.grad.norm().item()  # a host-device sync per parameter
    return norms


def train(steps: int, device: torch.device, batch: int = 32) -> nn.Module:
    model = build_model(device)
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(steps):
        x = torch.randn(batch, 32, device=device)
        y = torch.randint(0, 10, (batch,), device=device)
        loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        norms = grad_norms(model)
        opt.step()
        if step % 10 == 0 or step == steps - 1:
            print(f"step {step:4d}  loss {loss.detach().float():.4f}  max grad norm {max(norms.values()):.3f}")
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
