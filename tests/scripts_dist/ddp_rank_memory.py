"""Two-rank DDP on NCCL, one GPU per rank, each limited to LIMIT_GIB of its GPU with
``torch.cuda.set_per_process_memory_fraction``; rank k holds FILLS[k] of its limit in
tensors (rank 0 logging extra copies, say) while it trains. FILLS="0.5,0.93": rank 1
is close to its limit; FILLS="0.6,0.6": both have room."""
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

FILLS = [float(f) for f in os.environ.get("FILLS", "0.5,0.93").split(",")]
LIMIT = int(float(os.environ.get("LIMIT_GIB", "4")) * 2**30)
STEPS = int(os.environ.get("STEPS", "40"))


def main():
    dist.init_process_group(os.environ.get("BACKEND", "nccl"))
    rank = dist.get_rank()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    torch.cuda.set_device(device)
    total = torch.cuda.get_device_properties(device).total_memory
    torch.cuda.set_per_process_memory_fraction(LIMIT / total, device)
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(256, 1).to(device), device_ids=[device.index])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    held = torch.empty(int(LIMIT * FILLS[rank]) - torch.cuda.memory_allocated(device), dtype=torch.uint8,
                       device=device)
    for _ in range(STEPS):
        x, y = torch.randn(64, 256, device=device), torch.randn(64, 1, device=device)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(0.05)  # a few memory samples while the tensors are held
    torch.cuda.synchronize(device)
    del held
    dist.barrier()
    if rank == 0:
        print("trained", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
