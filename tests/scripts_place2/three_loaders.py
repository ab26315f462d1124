"""Three DataLoaders zipped; the middle one, built in a helper function, reads slowly
(1 ms per sample, batch 8); the first and the last are in memory (batch 32 and 48)."""

from __future__ import annotations

import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset


class Records(Dataset):
    def __len__(self) -> int:
        return 2048

    def __getitem__(self, i: int):
        time.sleep(0.001)  # a slow read: blocked, not computing
        return torch.full((4,), float(i % 5))


def make_records_loader(batch: int) -> DataLoader:
    return DataLoader(Records(), batch_size=batch, drop_last=True)


def main(steps: int) -> None:
    torch.manual_seed(0)
    images = DataLoader(TensorDataset(torch.randn(4096, 4)), batch_size=32)
    records = make_records_loader(8)
    labels = DataLoader(TensorDataset(torch.randn(4096, 1)), batch_size=48)
    model = nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step, ((x,), r, (y,)) in enumerate(zip(images, records, labels, strict=False)):
        loss = ((model(torch.cat([x[:8], r], 1)) - y[:8]) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step + 1 >= steps:
            break
    print("done")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 60)
