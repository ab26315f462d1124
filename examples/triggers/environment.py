"""Trigger for the environment rules: `mps-unavailable`, `rosetta-python`, `intel-mac`.

These depend on the machine, not the script: run any training, like this one, on a Mac
whose torch has no usable MPS (old macOS, a third-party build, a VM), under an x86_64
Python translated by Rosetta, or on an Intel Mac, and mpsprof says why MPS is out of
reach and how to fix the install. On a healthy Apple-silicon Mac it reports nothing.
"""

from __future__ import annotations

import torch


def main() -> None:
    device = torch.device("mps" if torch.backends.mps.is_available() else "cpu")
    print(f"torch {torch.__version__}: built with MPS {torch.backends.mps.is_built()}, "
          f"available {torch.backends.mps.is_available()}; training on {device}")
    model = torch.nn.Linear(8, 1).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(5):
        loss = model(torch.randn(16, 8, device=device)).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
