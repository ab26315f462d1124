"""Two-rank DDP on gloo; SLOW_RANK sleeps in its input pipeline (its dataset is slow)."""
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset

SLOW_RANK = int(os.environ.get("SLOW_RANK", "1"))
BACKEND = os.environ.get("BACKEND", "gloo")
DEVICE = os.environ.get("DEVICE", "cpu")  # cuda: every rank on cuda:LOCAL_RANK % device count
STEPS = int(os.environ.get("STEPS", "30"))


class Data(Dataset):
    def __init__(self, slow: bool) -> None:
        self.slow = slow

    def __len__(self):
        return STEPS * 8

    def __getitem__(self, i):
        if self.slow:
            time.sleep(0.004)
        return torch.randn(16), torch.randn(1)


def main():
    dist.init_process_group(BACKEND)
    rank = dist.get_rank()
    torch.manual_seed(0)
    if DEVICE == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
        torch.cuda.set_device(device)
        model = DDP(torch.nn.Linear(16, 1).to(device), device_ids=[device.index])
    else:
        device = torch.device("cpu")
        model = DDP(torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Data(rank == SLOW_RANK), batch_size=8)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
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
