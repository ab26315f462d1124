"""pytorch/examples-style training whose Dataset sleeps: the loader, not the model, is slow.

num_workers=0 as written: every batch is built on the training thread (SLEEP s per
sample) while the step computes for about WORK s. Prints the loss every 5 steps.
"""
import os
import time

import torch
from torch.utils.data import DataLoader, Dataset

SLEEP = float(os.environ.get("SLEEP", "0.02"))
WORK = float(os.environ.get("WORK", "0.006"))
STEPS = int(os.environ.get("STEPS", "60"))


class SlowImages(Dataset):
    def __len__(self):
        return STEPS * 2

    def __getitem__(self, i):
        time.sleep(SLEEP)  # decoding a JPEG from a slow disk
        g = torch.Generator().manual_seed(i)
        return torch.randn(8, generator=g), torch.tensor([float(i % 3)])


def main():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(SlowImages(), batch_size=2, shuffle=False, num_workers=0)
    for step, (x, y) in enumerate(loader):
        t = time.perf_counter()
        while time.perf_counter() - t < WORK:  # the forward/backward of a bigger model
            pass
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 5 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
        if step + 1 >= STEPS:
            break
    print("workers", torch.utils.data.get_worker_info(), "threads", torch.get_num_threads(),
          "omp", os.environ.get("OMP_NUM_THREADS"))


if __name__ == "__main__":
    main()
