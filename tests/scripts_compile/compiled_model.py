"""``torch.compile(model)`` in a small training loop.

argv: BACKEND [--fullgraph] [--warnings-error]. ``--warnings-error`` turns every
UserWarning into an exception (as strict test suites do). The model goes to eval mode
for one batch at step 3, so Dynamo recompiles on a step the op sampler samples.
"""
import sys
import warnings

import torch
from torch import nn

if "--warnings-error" in sys.argv:
    warnings.simplefilter("error", UserWarning)
backend = sys.argv[1]
torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


model = Net()
cmodel = torch.compile(model, fullgraph="--fullgraph" in sys.argv, backend=backend)
opt = torch.optim.AdamW(model.parameters(), lr=0.01)
x, y = torch.randn(32, 8), torch.randn(32, 1)
for step in range(7):
    if step == 3:
        model.eval()
        with torch.no_grad():
            print(f"eval: {cmodel(x).mean().item():.6f}")
        model.train()
    loss = ((cmodel(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    print(f"step {step}: loss {loss.item():.6f}")
