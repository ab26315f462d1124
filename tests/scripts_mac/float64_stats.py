"""mac_spectral.py made small: float32 training with float64 running stats.

The stats start float64 from NumPy (``torch.from_numpy(np.zeros(...))``, before the first
step) and are updated with ``.double()`` in the loop: rewriting only ``.double()`` leaves
them float64 (float64 wins the type promotion), and a Mac still raises. The line above the
update multiplies too (``w * 100``), in float32: the float64 ops are not that line's.
"""
import numpy as np
import torch
import torch.nn as nn

device = "mps" if torch.backends.mps.is_available() else "cpu"
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
feat_mean = torch.from_numpy(np.zeros(16)).to(device)  # float64 running stats
for step in range(40):
    x = torch.randn(8, 16, device=device)
    y = torch.randint(0, 4, (8,), device=device)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        w = model[0].weight
        levels = torch.round(w * 100)
        feat_mean = 0.99 * feat_mean + 0.01 * w.double().mean(0)
print(f"stats {feat_mean.sum().item():.4f} levels {levels.numel()}")
