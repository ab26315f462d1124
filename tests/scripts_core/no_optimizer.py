"""Inference over a DataLoader, no optimizer: steps fall back to batches."""
import torch
from torch.utils.data import DataLoader, TensorDataset

model = torch.nn.Linear(8, 2)
loader = DataLoader(TensorDataset(torch.randn(80, 8)), batch_size=4)
with torch.no_grad():
    for (x,) in loader:
        model(x)
