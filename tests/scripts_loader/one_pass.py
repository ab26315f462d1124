"""A training that reads its DataLoader in one pass (one epoch) or several, the loading in
the training process (num_workers=0): each sample is a slow read (it sleeps), so the loader
needs workers. Read in one pass, `persistent_workers=True` has no next epoch to keep them
for; read in several, it keeps them.

    python one_pass.py            # one epoch
    python one_pass.py 3          # three epochs
"""

import sys
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
    epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    loader = DataLoader(SlowReads(), batch_size=8, shuffle=True)
    for epoch in range(epochs):
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
