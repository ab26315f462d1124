"""A script with its training at the top level, no ``__main__`` guard, and a DataLoader
whose samples are slow to read (no workers): the stall fix adds workers, and on macOS
(spawn) workers re-import the script, so the fix needs the guard too."""
import time

import torch
from torch.utils.data import DataLoader, Dataset

STEPS = 40


class SlowReads(Dataset):
    def __len__(self):
        return STEPS * 4

    def __getitem__(self, i):
        time.sleep(0.005)  # a read from a slow disk
        return torch.full((8,), float(i % 7)), torch.tensor([float(i % 3)])


torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(SlowReads(), batch_size=4)
for step, (x, y) in enumerate(loader):
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 10 == 0:
        print(f"step {step} loss {loss.item():.4f}")
print("done")
