"""A script whose DataLoader takes its workers from a command-line option
(``num_workers=args.workers``, default 0), and whose Dataset sleeps 4 ms a sample (a slow
read): the stall fix goes to the option's default, so ``--workers`` keeps working.

    python option_workers.py [--workers N] [--steps 40]
"""
import argparse
import time

import torch
from torch.utils.data import DataLoader, Dataset


class SlowReads(Dataset):
    def __len__(self) -> int:
        return 320

    def __getitem__(self, i: int):
        time.sleep(0.004)  # the read
        return torch.randn(16), i % 2


parser = argparse.ArgumentParser()
parser.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
parser.add_argument("--steps", type=int, default=40)
args = parser.parse_args()
torch.manual_seed(0)
model = torch.nn.Linear(16, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(SlowReads(), batch_size=16, num_workers=args.workers)
step = 0
while step < args.steps:  # epochs until --steps: 40 read 20 batches twice (persistent_workers pays)
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step == args.steps:
            break
print(f"trained {args.steps} steps with {args.workers} workers")
