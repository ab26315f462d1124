"""Two DataLoaders read one command-line option (``num_workers=args.workers``): the train
loader's Dataset sleeps 4 ms a sample (slow), the validation one is cheap and read once."""
import argparse
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Reads(Dataset):
    def __init__(self, sleep_s: float) -> None:
        self.sleep_s = sleep_s

    def __len__(self) -> int:
        return 320

    def __getitem__(self, i: int):
        time.sleep(self.sleep_s)
        return torch.randn(16), i % 2


parser = argparse.ArgumentParser()
parser.add_argument("--workers", type=int, default=0)
parser.add_argument("--steps", type=int, default=40)
args = parser.parse_args()
model = torch.nn.Linear(16, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
train = DataLoader(Reads(0.004), batch_size=16, num_workers=args.workers)
val = DataLoader(Reads(0.0), batch_size=64, num_workers=args.workers)
step = 0
while step < args.steps:  # epochs until --steps: 40 read 20 batches twice (persistent_workers pays)
    for x, y in train:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step == args.steps:
            break
with torch.no_grad():
    for x, y in val:
        model(x)
print(f"trained with {args.workers} workers")
