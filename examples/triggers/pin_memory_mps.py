"""Trigger for `pin-memory-mps` (on a Mac): a CUDA habit, `pin_memory=True`, on MPS.

PyTorch warns "'pin_memory' argument is set as true but not supported on MPS now" and
ignores it. Elsewhere the script trains normally and the rule does not apply.
"""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    device = torch.device("mps" if torch.backends.mps.is_available() else "cpu")
    data = TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
    loader = DataLoader(data, batch_size=8, pin_memory=True)  # copied from a CUDA script
    model = torch.nn.Linear(8, 1).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
