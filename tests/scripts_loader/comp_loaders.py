"""One dict comprehension builds both loaders (the validation one first); the training set is
slow to read. Workers belong to the training loader only: `split == "train"`."""
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Rows(Dataset):
    def __init__(self, n, slow):
        self.n, self.slow = n, slow

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.slow:
            time.sleep(0.0025)
        return torch.full((8,), float(i % 5)), i % 2


def main():
    torch.manual_seed(0)
    loaders = {split: DataLoader(Rows(320 if split == "train" else 64, split == "train"), batch_size=16)
               for split in ("val", "train")}
    model = nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for x, y in loaders["train"]:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            val = sum(nn.functional.cross_entropy(model(x), y).item() for x, y in loaders["val"])
        print(f"epoch {epoch} train {loss.item():.3f} val {val:.3f}")


if __name__ == "__main__":
    main()
