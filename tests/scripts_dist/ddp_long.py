"""A DDP job that runs until interrupted (for the Ctrl-C test).

Each rank says how it stopped, whichever way the stop reaches it first: its own SIGINT
(KeyboardInterrupt), torchrun's agent stopping its workers with SIGTERM, or the error of a
collective whose peer stopped first (gloo: the connection closed). Only the first printed
before: a rank inside the allreduce when its peer left missed the line (seen once in CI)."""
import signal
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    try:
        while True:
            loss = model(torch.randn(4, 8)).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            time.sleep(0.01)
    except BaseException as exc:
        print(f"rank {rank} interrupted ({type(exc).__name__})", flush=True)
        raise


if __name__ == "__main__":
    main()
