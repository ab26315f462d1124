"""Each batch takes a known time to load (SLEEP s) and the step computes for WORK s."""
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

SLEEP = float(os.environ.get("SLEEP", "0.03"))
WORK = float(os.environ.get("WORK", "0.01"))
STEPS = int(os.environ.get("STEPS", "30"))
WORKERS = int(os.environ.get("WORKERS", "0"))


class Sleepy(Dataset):
    def __len__(self):
        return STEPS

    def __getitem__(self, i):
        time.sleep(SLEEP)
        return torch.ones(4) * i


def main():
    if os.environ.get("START_METHOD"):
        import multiprocessing

        multiprocessing.set_start_method(os.environ["START_METHOD"], force=True)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    loader = DataLoader(Sleepy(), batch_size=None, num_workers=WORKERS)
    total = 0.0
    for x in loader:
        t = time.perf_counter()
        while time.perf_counter() - t < WORK:
            pass
        loss = model(x).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        total += float(x.sum())
    print("sum", total)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
