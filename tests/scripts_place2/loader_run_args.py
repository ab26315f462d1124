"""Lightning-shaped without Lightning: a data module whose train_dataloader() builds the
loader, an entry point named run(args) (no main()), called at module level without an
`if __name__ == "__main__":` guard. The loader reads slowly (1 ms per sample, batch 16)."""

import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class SlowReads(Dataset):
    def __len__(self):
        return 4096

    def __getitem__(self, i):
        time.sleep(0.001)  # a slow read: blocked, not computing
        return torch.full((8,), float(i % 7))


class Data:
    def __init__(self, batch):
        self.batch = batch
        self.train_set = SlowReads()

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.batch, shuffle=True)


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("steps", type=int, nargs="?", default=60)
    return parser.parse_args()


def run(args):
    torch.manual_seed(0)
    model = nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step, x in enumerate(Data(16).train_dataloader()):
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step + 1 >= args.steps:
            break
    print("done")


run(parse_args())
