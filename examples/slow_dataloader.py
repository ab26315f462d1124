"""A small image classifier on synthetic data, with a real and common problem.

The dataset decodes every sample on the fly (simulated here with a short sleep), and the
DataLoader loads them in the training process (``num_workers=0``): the accelerator waits
for data most of the time. ``mpsprof run examples/slow_dataloader.py`` names the stall
and the fix; ``--workers 2`` applies it.

The device is chosen as the field guide advises: ``ML_DEVICE`` (cpu | cuda | mps) if set,
else MPS, else CUDA, else CPU.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


def pick_device() -> torch.device:
    forced = os.environ.get("ML_DEVICE")
    if forced:
        return torch.device(forced)
    if torch.backends.mps.is_available():
        return torch.device("mps")
    if torch.cuda.is_available():
        return torch.device("cuda")
    return torch.device("cpu")


class SlowImages(Dataset):
    """Synthetic 3x32x32 images; each sample costs ``delay`` seconds to 'decode'."""

    def __init__(self, n: int, delay: float) -> None:
        self.n = n
        self.delay = delay

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        time.sleep(self.delay)
        g = torch.Generator().manual_seed(i)
        x = torch.randn(3, 32, 32, generator=g)
        y = int(torch.randint(0, 10, (1,), generator=g))
        return x, y


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 8 * 8, 10),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--delay", type=float, default=0.002, help="seconds to decode one sample")
    args = parser.parse_args()

    torch.manual_seed(0)
    device = pick_device()
    model = make_model().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    data = SlowImages(args.steps * args.batch_size, args.delay)
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=True, num_workers=args.workers,
                        persistent_workers=args.workers > 0)
    loss_fn = nn.CrossEntropyLoss()
    print(f"training on {device} for {args.steps} steps (num_workers={args.workers})")
    for step, (x, y) in enumerate(loader):
        x, y = x.to(device), y.to(device)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        if step % 20 == 0:
            print(f"step {step:4d}  loss {loss.item():.3f}")
    print("done")


if __name__ == "__main__":
    main()
