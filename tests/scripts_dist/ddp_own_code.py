"""Two-rank DDP on gloo, no DataLoader; SLOW_RANK spends SLOW_MS per step in its own
loop (slow augmentation on the training thread, made predictable with a sleep)."""
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

SLOW_RANK = int(os.environ.get("SLOW_RANK", "1"))
SLOW_MS = float(os.environ.get("SLOW_MS", "10"))
STEPS = int(os.environ.get("STEPS", "30"))


def main():
    dist.init_process_group(os.environ.get("BACKEND", "gloo"))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(STEPS):
        x, y = torch.randn(8, 16), torch.randn(8, 1)
        if rank == SLOW_RANK:
            time.sleep(SLOW_MS / 1000)  # its own code: augmentation on the main thread
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
