"""``@torch.compile(fullgraph=True)`` around a loss function that calls the model.

argv: BACKEND (eager | aot_eager | inductor). The batch shrinks at step 3, so Dynamo
recompiles on a step the op sampler samples (step 3 always is).
"""
import sys

import torch
from torch import nn

backend = sys.argv[1] if len(sys.argv) > 1 else "eager"
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)


@torch.compile(fullgraph=True, backend=backend)
def loss_fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return nn.functional.mse_loss(model(x), y)


x, y = torch.randn(16, 8), torch.randn(16, 1)
for step in range(7):
    n = 16 if step < 3 else 8
    loss = loss_fn(x[:n], y[:n])
    loss.backward()
    opt.step()
    opt.zero_grad()
    print(f"step {step}: loss {loss.item():.6f}")
