"""Training with an evaluation pass every 10 steps that keeps its outputs with their graphs
(no torch.no_grad()) in one list for the whole run. `--no-grad` runs the pass under
torch.no_grad(): the same list then keeps plain outputs. Each step sleeps 5 ms (a real step's
logging and bookkeeping): on a quiet machine the 300 steps otherwise took ~1.5 s, too few
memory samples for the growth to count (the tensor-leak rule)."""
import sys
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
train = DataLoader(TensorDataset(torch.randn(64 * 300, 256), torch.randint(0, 10, (64 * 300,))), batch_size=64)
val = DataLoader(TensorDataset(torch.randn(256 * 4, 256), torch.randint(0, 10, (256 * 4,))), batch_size=256)
model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
val_preds = []


def evaluate():
    model.eval()
    for xv, _ in val:
        val_preds.append(model(xv))
    model.train()


for step, (x, y) in enumerate(train):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    time.sleep(0.005)
    if step % 10 == 9:
        if "--no-grad" in sys.argv:
            with torch.no_grad():
                evaluate()
        else:
            evaluate()
print("kept", len(val_preds))
