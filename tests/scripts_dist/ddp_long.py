"""A DDP job that runs until interrupted (for the Ctrl-C test)."""
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    try:
        while True:
            loss = model(torch.randn(4, 8)).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            time.sleep(0.01)
    except KeyboardInterrupt:
        print(f"rank {dist.get_rank()} interrupted", flush=True)
        raise


if __name__ == "__main__":
    main()
