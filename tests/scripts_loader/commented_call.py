"""A training whose DataLoader call is written over lines with comments in it (what the
arguments are for, a setting left for later), the loading in the training process: each
sample is a slow read (it sleeps), so the loader needs workers. The fix shows this call
with the workers set, its comments where they were.

    python commented_call.py
"""

import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class SlowReads(Dataset):
    def __len__(self):
        return 480

    def __getitem__(self, i):
        time.sleep(0.002)  # the read: blocked, not computing
        g = torch.Generator().manual_seed(i)
        return torch.randn(64, generator=g), torch.tensor(float(i % 2))


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    loader = DataLoader(
        SlowReads(),  # 480 samples, read from disk
        batch_size=8,  # what fits on the small GPU
        shuffle=True,
        # num_workers: tune once the model is right
    )
    for epoch in range(2):
        total = 0.0
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x).squeeze(1), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        print(f"epoch {epoch} loss {total / len(loader):.6f}")


if __name__ == "__main__":
    main()
