"""A training loop whose DataLoader spends its time choosing indices, not loading samples.

``--slow batch_sampler`` (the default): a ``BucketBatchSampler`` whose ``__iter__`` does
its work per batch (here: sleeps 20 ms, as a sampler that sorts a bucket by length or
queries a service would take). torch draws every batch's indices in the training process
(``_BaseDataLoaderIter._next_index`` in torch/utils/data/dataloader.py, called by
``_next_data`` without workers and by ``_try_put_index`` with them), so worker processes
cannot take that time over: more workers only add their start-up and memory.

``--slow sampler``: the same per index, from a plain ``sampler=`` (``SlowOrderSampler``).

``--slow getitem``: the twin whose ``Dataset.__getitem__`` takes the same time per batch;
workers do take that over.

    python slow_sampler.py --workers 0 --slow batch_sampler
    python slow_sampler.py --workers 4 --slow batch_sampler   # no faster
    python slow_sampler.py --workers 4 --slow getitem         # faster
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, Sampler


class Samples(Dataset):
    def __init__(self, n: int, dim: int, sleep_s: float) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, dim, generator=g)
        self.y = torch.randn(n, generator=g)
        self.sleep_s = sleep_s

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        if self.sleep_s:
            time.sleep(self.sleep_s)  # a slow read, per sample
        return self.x[i], self.y[i]


class BucketBatchSampler(Sampler[list[int]]):
    """Groups indices into batches of similar "length"; the bucketing is redone per batch."""

    def __init__(self, n: int, batch_size: int, sleep_s: float) -> None:
        self.n, self.batch_size, self.sleep_s = n, batch_size, sleep_s

    def __len__(self) -> int:
        return self.n // self.batch_size

    def __iter__(self):
        order = torch.randperm(self.n).tolist()
        for start in range(0, self.n - self.batch_size + 1, self.batch_size):
            time.sleep(self.sleep_s)  # per batch: sort a bucket, ask a service, ...
            yield order[start:start + self.batch_size]


class SlowOrderSampler(Sampler[int]):
    """Yields a random order, doing some work per index."""

    def __init__(self, n: int, sleep_s: float) -> None:
        self.n, self.sleep_s = n, sleep_s

    def __len__(self) -> int:
        return self.n

    def __iter__(self):
        for i in torch.randperm(self.n).tolist():
            time.sleep(self.sleep_s)
            yield i


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--sleep-ms", type=float, default=20.0, help="per batch")
    parser.add_argument("--slow", choices=("batch_sampler", "sampler", "getitem"), default="batch_sampler")
    parser.add_argument("--dim", type=int, default=256)
    args = parser.parse_args()
    torch.manual_seed(0)
    n, per_batch = args.steps * args.batch_size, args.sleep_ms / 1000.0
    model = nn.Sequential(nn.Linear(args.dim, args.dim), nn.ReLU(), nn.Linear(args.dim, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    common = dict(num_workers=args.workers, persistent_workers=args.workers > 0)
    if args.slow == "batch_sampler":
        data = Samples(n, args.dim, 0.0)
        loader = DataLoader(data, batch_sampler=BucketBatchSampler(n, args.batch_size, per_batch), **common)
    elif args.slow == "sampler":
        data = Samples(n, args.dim, 0.0)
        loader = DataLoader(data, batch_size=args.batch_size, sampler=SlowOrderSampler(n, per_batch / args.batch_size),
                            **common)
    else:
        data = Samples(n, args.dim, per_batch / args.batch_size)
        loader = DataLoader(data, batch_size=args.batch_size, shuffle=True, **common)
    started = time.perf_counter()
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x).squeeze(1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"trained {args.steps} batches in {time.perf_counter() - started:.2f} s "
          f"(num_workers={args.workers}, slow {args.slow})")


if __name__ == "__main__":
    main()
