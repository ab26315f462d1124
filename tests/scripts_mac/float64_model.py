"""A regression trained in float64 (NumPy data, `model.double()`): MPS has no float64."""
import numpy as np
import torch
from torch import nn

rng = np.random.default_rng(0)
features, targets = rng.normal(size=(256, 8)), rng.normal(size=(256, 1))  # float64
model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1)).double()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(10):
    x = torch.from_numpy(features[step * 16:(step + 1) * 16])
    y = torch.from_numpy(targets[step * 16:(step + 1) * 16])
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"loss {loss.item():.3f}")
