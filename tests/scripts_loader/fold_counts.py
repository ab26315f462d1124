"""A training whose batches the per-loader sums must all count: two loaders, one with
fork-started workers (its workers inherit the probe and its log of batches not yet
folded), passes of known lengths, and optionally a crash in the middle of a pass.

    python fold_counts.py             # ends on its own
    python fold_counts.py crash       # raises at the 150th batch of the second pass
"""

import multiprocessing
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    crash = len(sys.argv) > 1 and sys.argv[1] == "crash"
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(2048, 16), torch.randn(2048, 1))
    # 256 batches a pass, read in the training process: fast steps, many batches a channel wake
    train = DataLoader(data, batch_size=8)
    # 32 batches a pass from 2 fork-started workers
    side = DataLoader(data, batch_size=64, num_workers=2, multiprocessing_context=multiprocessing.get_context("fork"))
    model = nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    for epoch in range(2):
        for k, (x, y) in enumerate(train):
            if crash and epoch == 1 and k == 150:
                raise RuntimeError("a crash in the middle of a pass")
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            for x, y in side:
                model(x)
        print(f"epoch {epoch} done", flush=True)


if __name__ == "__main__":
    main()
