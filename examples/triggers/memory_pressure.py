"""Trigger for `memory-pressure`: the training holds more memory than the machine has free.

It keeps batches of a cache in memory until only 6% of the machine's memory is available,
trains a few steps like that, then frees everything. This really does squeeze the
machine (on a Mac it can start swapping), so it only runs with `--go`:

    mpsprof run examples/triggers/memory_pressure.py --go

mpsprof then names the pressure and the batch size that fits.
"""

from __future__ import annotations

import argparse
import sys

import psutil
import torch

CHUNK = 256 * 2**20


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--go", action="store_true", help="really fill the memory")
    parser.add_argument("--leave", type=float, default=0.06, help="share of memory to leave free")
    args = parser.parse_args()
    if not args.go:
        sys.exit("memory_pressure.py fills the machine's memory; run it with --go if you mean it")
    model = torch.nn.Linear(1024, 1024)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    cache = []  # e.g. a dataset "cached in RAM" that does not fit
    total = psutil.virtual_memory().total
    while psutil.virtual_memory().available > args.leave * total:
        cache.append(torch.ones(CHUNK // 4))  # ones: the pages are really touched
    for _ in range(40):
        x = torch.randn(256, 1024)
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"held {len(cache) * CHUNK / 2**30:.1f} GiB")
    cache.clear()


if __name__ == "__main__":
    main()
