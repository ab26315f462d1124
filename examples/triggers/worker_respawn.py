"""Trigger for `worker-respawn`: DataLoader workers without `persistent_workers=True`
are shut down at the end of every epoch and started again for the next one.

Short epochs make the restart cost visible: the first batch of each epoch waits for new
worker processes (with spawn, the macOS default, each one imports torch again).
"""

from __future__ import annotations

import time

import torch
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    data = TensorDataset(torch.randn(40, 8), torch.randn(40, 1))
    loader = DataLoader(data, batch_size=8, num_workers=2)  # persistent_workers=False
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(6):
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            busy_until = time.perf_counter() + 0.02  # the rest of a real step
            while time.perf_counter() < busy_until:
                pass
    print("done")


if __name__ == "__main__":
    main()
