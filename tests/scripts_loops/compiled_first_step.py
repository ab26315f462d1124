"""A torch.compile'd model whose step 0 is long: compilation, made long and predictable
with a sleep of FIRST_STEP_S in step 0 (a real compile of a large model takes minutes)."""
import os
import time

import torch

FIRST_STEP_S = float(os.environ.get("FIRST_STEP_S", "10.5"))
STEPS = int(os.environ.get("STEPS", "8"))
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
compiled = torch.compile(model, backend=os.environ.get("BACKEND", "eager"))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(STEPS):
    loss = torch.nn.functional.mse_loss(compiled(torch.randn(8, 16)), torch.randn(8, 1))
    if step == 0:
        time.sleep(FIRST_STEP_S)
    opt.zero_grad()
    loss.backward()
    opt.step()
    time.sleep(0.02)
print("steps", STEPS)
