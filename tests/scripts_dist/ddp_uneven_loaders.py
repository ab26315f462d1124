"""DDP on gloo whose ranks load data at different speeds: the ranks in SLOW_RANKS read
from a slow dataset (LOAD_MS per batch, a sleep: a slower disk or a heavier shard), the
others load at once. DDP's gradient all-reduce evens out the ranks' step times; what
differs is where each rank spends them (waiting for data, or waiting in backward).
SLOW_RANKS=all: every rank loads slowly (even loaders)."""
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset

SLOW_RANKS = os.environ.get("SLOW_RANKS", "0,1,2")
LOAD_MS = float(os.environ.get("LOAD_MS", "30"))
STEPS = int(os.environ.get("STEPS", "24"))
BATCH = 8


class Data(Dataset):
    def __init__(self, slow: bool) -> None:
        self.slow = slow

    def __len__(self):
        return STEPS * BATCH

    def __getitem__(self, i):
        if self.slow:
            time.sleep(LOAD_MS / 1000 / BATCH)
        return torch.randn(16), torch.randn(1)


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    slow = SLOW_RANKS == "all" or str(rank) in SLOW_RANKS.split(",")
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for x, y in DataLoader(Data(slow), batch_size=BATCH):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    dist.barrier()
    if rank == 0:
        print("trained", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
