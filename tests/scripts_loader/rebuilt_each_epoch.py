"""A DataLoader built anew every epoch (a generator seeded per epoch) over a Dataset that
sleeps 2 ms a sample: one loader to the user, four constructions to torch. argv[1]: its
num_workers (0), argv[2]: epochs (4)."""
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Slow(Dataset):
    def __len__(self):
        return 160

    def __getitem__(self, i):
        time.sleep(0.002)
        return torch.full((32,), float(i % 7)), i % 4


def main():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    workers = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    for epoch in range(epochs):
        g = torch.Generator().manual_seed(epoch)
        loader = DataLoader(Slow(), batch_size=16, shuffle=True, generator=g, num_workers=workers)
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    print("loss", round(loss.item(), 3))


if __name__ == "__main__":
    main()
