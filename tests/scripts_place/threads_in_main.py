"""A CPU training whose main() sets 16 torch threads itself, with 2 DataLoader workers
that barely compute: the thread fix must rewrite that line, not add one at the top."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    torch.set_num_threads(16)
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(4096, 64), torch.randn(4096, 1))
    loader = DataLoader(data, batch_size=32, num_workers=2, persistent_workers=True)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for x, y in loader:
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("done")


if __name__ == "__main__":
    main()
