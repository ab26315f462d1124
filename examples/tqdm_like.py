"""A small training loop that draws its progress bar with carriage returns, as tqdm does.

Progress bars redraw one line with ``\\r`` many times a second; ``mpsprof run`` shows
them in the Log panel as a terminal would (one line that updates), not as thousands of
half-drawn lines. No tqdm dependency: the bar is printed by hand to stderr, like tqdm.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def bar(epoch: int, i: int, n: int, loss: float, rate: float, width: int = 30) -> str:
    filled = int(width * i / n)
    return (f"\repoch {epoch}: {100 * i // n:3d}%|{'█' * filled}{' ' * (width - filled)}| "
            f"{i}/{n} [loss={loss:.3f}, {rate:.1f} it/s]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=100, help="steps per epoch")
    parser.add_argument("--delay", type=float, default=0.01, help="extra seconds per step")
    args = parser.parse_args()

    torch.manual_seed(0)
    n = args.steps * 32
    data = TensorDataset(torch.randn(n, 64), torch.randint(0, 4, (n,)))
    loader = DataLoader(data, batch_size=32, shuffle=True)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 4))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    print(f"training {args.epochs} epochs of {args.steps} steps", flush=True)
    for epoch in range(args.epochs):
        start = time.perf_counter()
        for i, (x, y) in enumerate(loader, start=1):
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            time.sleep(args.delay)
            rate = i / max(time.perf_counter() - start, 1e-9)
            sys.stderr.write(bar(epoch, i, args.steps, loss.item(), rate))
            sys.stderr.flush()
        sys.stderr.write("\n")
        print(f"epoch {epoch} done", flush=True)


if __name__ == "__main__":
    main()
