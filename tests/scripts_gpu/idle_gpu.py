"""CUDA: MODE=idle -> tiny GPU work, long data wait; MODE=busy -> long GPU work queued, short wait."""
import os
import time

import torch
from torch.utils.data import DataLoader, Dataset

MODE = os.environ.get("MODE", "idle")


class Slow(Dataset):
    def __len__(self):
        return 30

    def __getitem__(self, i):
        time.sleep(0.02 if MODE == "idle" else 0.002)
        return torch.randn(64)


def main():
    dev = torch.device("cuda")
    model = torch.nn.Linear(64, 64).to(dev)
    big = torch.randn(8192, 8192, device=dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for x in DataLoader(Slow(), batch_size=None):
        x = x.to(dev)
        loss = model(x).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if MODE == "busy":
            for _ in range(6):  # ~20+ ms of queued GPU work after the step's own
                big = (big @ big).clamp_(-1, 1)


if __name__ == "__main__":
    main()
