"""Two DataLoaders zipped: the first in memory (batch 64), the second built later with a
Dataset that sleeps 1 ms per sample (batch 16). The stall is the second loader's."""

from __future__ import annotations

import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset


class SlowReads(Dataset):
    def __len__(self) -> int:
        return 4096

    def __getitem__(self, i: int):
        time.sleep(0.001)  # a slow read: blocked, not computing
        return torch.full((8,), float(i % 7))


def main() -> None:
    torch.manual_seed(0)
    fast = DataLoader(TensorDataset(torch.randn(8192, 8), torch.randn(8192, 1)), batch_size=64)
    slow = DataLoader(SlowReads(),
                      batch_size=16)
    model = nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for (x, y), extra in zip(fast, slow, strict=False):
        loss = ((model(torch.cat([x[:16], extra], 1)) - y[:16]) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("done")


if __name__ == "__main__":
    main()
