"""pytorch/examples-style: imports torch, spends SETUP_S seconds "loading data" (no step
yet), then trains STEPS optimizer steps on synthetic data; the first step takes 1.5 s
more (as a first step that warms up or compiles does). Live, "no training steps seen" must
not show during the setup nor stay once steps are counted."""
import os
import time

import torch
from torch import nn

setup_s = float(os.environ.get("SETUP_S", "3.0"))
steps = int(os.environ.get("STEPS", "60"))
time.sleep(setup_s)  # stands for a slow dataset download / preprocessing
model = nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(64, 16), torch.randn(64, 4)
for step in range(steps):
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    if step == 0:
        time.sleep(float(os.environ.get("FIRST_STEP_S", "1.5")))
    opt.step()
    time.sleep(0.05)
print(f"trained {steps} steps, loss {loss.item():.3f}")
