"""Trigger for `thread-oversubscription`: torch's intra-op threads plus one DataLoader
worker per core, all on the same cores.

Run it with torch's default thread count (one per core; do not set OMP_NUM_THREADS):

    mpsprof run examples/triggers/thread_oversubscription.py

torch uses every core for its own threads and the DataLoader adds a worker process per
core on top: about two busy threads per core. mpsprof suggests the thread count.
"""

from __future__ import annotations

import os

import torch
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    workers = min(os.cpu_count() or 2, 8)
    data = TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
    loader = DataLoader(data, batch_size=8, num_workers=workers)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"torch threads {torch.get_num_threads()}, workers {workers}, cores {os.cpu_count()}")


if __name__ == "__main__":
    main()
