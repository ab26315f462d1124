"""A streaming IterableDataset that fetches a shard of 64 samples every 64 samples (50 ms:
a slow store), batch 16: three batches of four come at once, the fourth waits. Used to
check that workers are sized from the average load (the median step would ask for one),
and that the advice says an IterableDataset's workers each yield the whole stream.

    python stream_shards.py --shards 40
    python stream_shards.py --split      # each worker reads only its shards (get_worker_info)
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info


class Shards(IterableDataset):
    def __init__(self, shards: int) -> None:
        self.shards = shards

    def __iter__(self):
        g = torch.Generator().manual_seed(0)
        for _ in range(self.shards):
            time.sleep(0.05)  # the next shard from the store
            for _ in range(64):
                yield torch.randn(32, generator=g), torch.randint(0, 3, (1,), generator=g).squeeze(0)


class SplitShards(Shards):
    """The docs' way: each worker reads every num_workers-th shard, from its id on."""

    def __iter__(self):
        info = get_worker_info()
        first, step = (info.id, info.num_workers) if info is not None else (0, 1)
        for shard in range(first, self.shards, step):
            g = torch.Generator().manual_seed(shard)
            time.sleep(0.05)  # the next shard from the store
            for _ in range(64):
                yield torch.randn(32, generator=g), torch.randint(0, 3, (1,), generator=g).squeeze(0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shards", type=int, default=40)
    parser.add_argument("--split", action="store_true", help="each worker takes its share of the shards")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 3))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = DataLoader((SplitShards if args.split else Shards)(args.shards), batch_size=16)
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
