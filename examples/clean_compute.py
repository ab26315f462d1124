"""A healthy, compute-bound training: in-memory data, no leaks, no oversubscription.

mpsprof should report nothing above `info` for it (it is the baseline the trigger scripts
in examples/triggers/ are compared with).
"""

from __future__ import annotations

import argparse
import os

import torch
from torch import nn
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, TensorDataset


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
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    torch.manual_seed(0)
    device = pick_device()
    data = TensorDataset(torch.randn(args.steps * 64, 256), torch.randint(0, 10, (args.steps * 64,)))
    # in-memory data fetched a whole batch per indexing op: loading costs next to nothing
    batches = BatchSampler(RandomSampler(data), batch_size=64, drop_last=True)
    loader = DataLoader(data, sampler=batches, batch_size=None)
    model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    running = torch.zeros((), device=device)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        running += loss.detach()
    print(f"mean loss {running.item() / len(loader):.3f}")


if __name__ == "__main__":
    main()
