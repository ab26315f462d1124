"""A regression whose loss becomes NaN at a known step (NAN_AT, default 20).

The loss is a log of a prediction that is made negative at that step, the way a
custom loss with ``torch.log`` of an unclamped value diverges. CLEAN=1: no NaN ever.
Clipping is on (``clip_grad_norm_``), so the probe sees gradient norms too.
"""

import os

import torch

torch.manual_seed(0)
NAN_AT = int(os.environ.get("NAN_AT", "20"))
CLEAN = os.environ.get("CLEAN") == "1"
STEPS = int(os.environ.get("STEPS", "40"))
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(32, 8)
y = torch.rand(32, 1) + 0.5
for step in range(STEPS):
    pred = model(x).abs() + 0.1
    if step == NAN_AT and not CLEAN:
        pred = pred - 10.0  # log of a negative number: NaN
    loss = ((torch.log(pred) - torch.log(y)) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
    opt.step()
    if step % 10 == 0:
        print(f"step {step} loss {loss.item():.4f}")
