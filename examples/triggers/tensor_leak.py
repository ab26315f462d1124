"""Trigger for `tensor-leak`: a loss kept as a tensor across steps keeps its graph alive.

The training loop also watches a held-out batch and adds its loss to a running total,
`total += loss`, without `torch.no_grad()` and without `.item()`: every step's forward
graph, activations included, stays reachable from `total`. Memory grows by the same
amount every step until the machine runs out.

    mpsprof run examples/triggers/tensor_leak.py      # names the leak and its growth per step
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from torch import nn


def pick_device() -> torch.device:
    forced = os.environ.get("ML_DEVICE")
    if forced:
        return torch.device(forced)
    if torch.backends.mps.is_available():
        return torch.device("mps")
    if torch.cuda.is_available():
        return torch.device("cuda")
    return torch.device("cpu")


def main() -> None:
    parser = argparse.ArgumentParser()
    # a number of steps, not of seconds: on a busy machine a timed loop made too few steps
    # for the growth to show (15 in 4.5 s with 1.7 of 2 cores taken by other programs)
    # and enough of them to read a trend: memory is sampled every 0.5 s, and the steady steps
    # of 160 steps of ~15 ms gave 6 samples, 3 a half, too few for each half's rise to count
    # (the tensor-leak rule), so the finding then stood on its growth against the scatter alone
    parser.add_argument("--steps", type=int, default=240, help="how many steps to train")
    args = parser.parse_args()
    torch.manual_seed(0)
    device = pick_device()
    model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 1)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss_fn = nn.MSELoss()
    x, y = torch.randn(64, 256, device=device), torch.randn(64, 1, device=device)
    x_val, y_val = torch.randn(192, 256, device=device), torch.randn(192, 1, device=device)
    total_val = 0.0
    for _ in range(args.steps):
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        total_val += loss_fn(model(x_val), y_val)  # the leak: a tensor with its whole graph
        time.sleep(0.02)  # the rest of a real step (logging, checkpoints)
    print(f"{args.steps} steps, mean val loss {float(total_val.detach()) / args.steps:.3f}")


if __name__ == "__main__":
    main()
