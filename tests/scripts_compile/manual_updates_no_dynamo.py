"""Manual SGD without torch.optim or torch.compile: plain python never imports torch._dynamo."""

import sys

import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
for step in range(12):
    loss = model(torch.randn(32, 8)).pow(2).mean()
    model.zero_grad()
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(p.grad, alpha=-0.05)
print(f"loss {loss.item():.6f} dynamo loaded: {'torch._dynamo' in sys.modules}")
