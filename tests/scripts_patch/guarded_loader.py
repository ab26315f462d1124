"""The same slow loader as toplevel_zip.py, its training in ``main()`` under the
``__main__`` guard: the workers' patch changes the loader's line and nothing else."""
import time

import torch
from torch.utils.data import DataLoader, Dataset


class SlowRows(Dataset):
    def __len__(self):
        return 192

    def __getitem__(self, i):
        time.sleep(0.003)  # a decode from disk
        return torch.full((8,), float(i % 7)), i % 3


def main():
    torch.manual_seed(0)
    loader = DataLoader(SlowRows(), batch_size=16, shuffle=True)
    head = torch.nn.Linear(8, 3)
    opt = torch.optim.SGD(head.parameters(), lr=0.1)
    for epoch in range(3):
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(head(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
