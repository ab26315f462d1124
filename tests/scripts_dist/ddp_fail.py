"""Rank 1 fails: the launcher reports the job as failed."""
import sys

import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
dist.barrier()
if rank == 1:
    sys.exit(3)
dist.destroy_process_group()
