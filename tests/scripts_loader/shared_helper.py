"""One helper builds both loaders; validation every 30 steps on a slow set."""
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Data(Dataset):
    def __init__(self, n, sleep):
        self.n, self.sleep = n, sleep

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.sleep:
            time.sleep(self.sleep)
        return torch.full((16,), float(i % 3)), i % 2


def make_loader(ds, shuffle=False):
    return DataLoader(ds, batch_size=32, shuffle=shuffle)


def main():
    torch.manual_seed(0)
    train_dl = make_loader(Data(32 * 120, 0.0), shuffle=True)
    val_dl = make_loader(Data(128, 0.004))
    model = nn.Linear(16, 2)
    opt = torch.optim.SGD(model.parameters(), 0.1)
    for step, (x, y) in enumerate(train_dl, 1):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 30 == 0:
            with torch.no_grad():
                acc = sum((model(vx).argmax(1) == vy).float().mean().item() for vx, vy in val_dl) / len(val_dl)
            print("step", step, "acc", round(acc, 3))


if __name__ == "__main__":
    main()
