"""Six training steps, a pause long enough for the probe to send them (its channel flushes
every half second, probe/channel.py), then the process kills itself with SIGKILL, as the
out-of-memory killer would: no atexit function runs, the probe's last events die with it.
``--exit`` ends it with ``os._exit(9)`` instead (also no atexit)."""

from __future__ import annotations

import os
import signal
import sys
import time

import torch

model = torch.nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(100):
    loss = model(torch.randn(32, 16)).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}", flush=True)
    if step == 5:
        time.sleep(2.0)  # four flushes of the probe's channel: steps 0 to 5 and their op samples go out
    if step == 6:
        if "--exit" in sys.argv:
            os._exit(9)
        os.kill(os.getpid(), signal.SIGKILL)
