"""No main(): the script trains at module level, with no `if __name__ == "__main__":` guard.
Its loader reads slowly (1 ms per sample, batch 16) and has no workers."""

import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

BATCH = 16


class SlowReads(Dataset):
    def __len__(self):
        return 4096

    def __getitem__(self, i):
        time.sleep(0.001)  # a slow read: blocked, not computing
        return torch.full((8,), float(i % 7))


torch.manual_seed(0)
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 60
loader = DataLoader(SlowReads(), batch_size=BATCH, shuffle=True)
model = nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step, x in enumerate(loader):
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step + 1 >= steps:
        break
print("done")
