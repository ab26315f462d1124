"""DDP trainers started with torch.multiprocessing.spawn (gloo, 2 CPU processes): the main
process trains no step itself. With RANK and WORLD_SIZE set (torchrun, ``mpsprof run
--nproc-per-node 2``) it runs its one rank in place of the spawn, as the fix says."""
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

STEPS = int(os.environ.get("STEPS", "30"))


def worker(rank, world, port):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), 0.05)
    g = torch.Generator().manual_seed(rank)
    for _ in range(STEPS):
        x = torch.randn(32, 16, generator=g)
        loss = nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"rank {rank} loss {loss.item():.6f}", flush=True)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    if "RANK" in os.environ:
        worker(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), 0)
    else:
        mp.spawn(worker, args=(2, free_port()), nprocs=2, join=True)
