"""Gradient accumulation: ACCUM micro-batches per update, UPDATES updates, with an
optimizer (OPT=1) or with manual updates."""
import os

import torch

UPDATES = int(os.environ.get("UPDATES", "6"))
ACCUM = int(os.environ.get("ACCUM", "4"))
torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01) if os.environ.get("OPT") else None
for update in range(UPDATES):
    for micro in range(ACCUM):
        loss = torch.nn.functional.mse_loss(model(torch.randn(4, 8)), torch.randn(4, 1)) / ACCUM
        loss.backward()
    if opt is not None:
        opt.step()
        opt.zero_grad()
    else:
        with torch.no_grad():
            for p in model.parameters():
                p -= 0.01 * p.grad
        model.zero_grad()
print("updates", UPDATES)
