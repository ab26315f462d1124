"""Batches of 1.5 MiB handed to CUDA from pageable memory (no pin_memory): the
pageable-copies finding names this DataLoader, and `mpsprof patch` adds pin_memory=True
to it. Synthetic data; needs CUDA (elsewhere it trains on the CPU and the rule, CUDA only,
does not fire)."""
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 60
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
data = TensorDataset(torch.randn(STEPS * 96, 4096), torch.randn(STEPS * 96, 1))
loader = DataLoader(data, batch_size=96, shuffle=True)
model = torch.nn.Linear(4096, 1).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.001)
for step, (x, y) in enumerate(loader):
    x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 20 == 0:
        print(f"step {step} loss {loss.item():.4f}")
print("done")
