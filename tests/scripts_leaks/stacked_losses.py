"""Losses kept with their graphs for a running average every 20 steps. The average is
``torch.stack(losses[-20:]).mean()``: a list of floats (``.item()``) would make that stack
raise a TypeError (test_leaks.py also runs a copy that averages them as numbers)."""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)

losses = []
for step in range(60):
    x = torch.randn(64, 64)
    loss = nn.functional.mse_loss(model(x), x[:, :1] * 2.0)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss)
    if (step + 1) % 20 == 0:
        print(f"step {step + 1} avg loss {torch.stack(losses[-20:]).mean().item():.4f}")
