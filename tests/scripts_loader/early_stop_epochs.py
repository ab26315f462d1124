"""An early-stopping loop: up to 20 short epochs over a DataLoader with 2 workers that are
not persistent, the start method left to the platform (fork on Linux, spawn on macOS).
Each epoch starts the workers again: milliseconds with fork, a new Python importing torch
and this script with spawn. ``--persistent`` keeps them; ``--epochs 1`` reads it once; ``--step-ms`` makes the steps
longer, so that the forked restarts cost little of them here.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--persistent", action="store_true")
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--step-ms", type=float, default=0.0, help="each step's work (a sleep)")
    args = parser.parse_args()
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(args.samples, 16), torch.arange(args.samples) % 4)
    loader = DataLoader(data, batch_size=16, shuffle=True, num_workers=2, persistent_workers=args.persistent)
    model = nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    best, patience = float("inf"), 0
    for epoch in range(args.epochs):
        total = 0.0
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            time.sleep(args.step_ms / 1000.0)
            total += loss.item()
        if total < best - 1e-4:
            best, patience = total, 0
        else:
            patience += 1
            if patience == 5:
                break
    print(f"epochs {epoch + 1} best {best:.4f}")


if __name__ == "__main__":
    main()
