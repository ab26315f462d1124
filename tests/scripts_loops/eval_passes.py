"""An evaluation-only script (no optimizer, no backward pass): PASSES passes over a
4-batch DataLoader under torch.inference_mode, printing each pass's accuracy. Its steps
are counted from the DataLoader's batches: one per batch. Synthetic data."""
import os

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

PASSES = int(os.environ.get("PASSES", "20"))
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)).eval()
loader = DataLoader(TensorDataset(torch.randn(256, 64), torch.randint(0, 10, (256,))), batch_size=64)
with torch.inference_mode():
    for p in range(PASSES):
        correct = 0
        for x, y in loader:
            for _ in range(4):
                out = model(x)
            correct += (out.argmax(1) == y).sum().item()
        print(f"pass {p} acc {correct / 256:.4f}")
