"""Mixed precision as a CUDA script writes it, on the CPU: autocast + GradScaler.

GradScaler.unscale_ takes the reciprocal of its scale in float64 on every device but MPS
(torch/amp/grad_scaler.py), so a CPU or CUDA run sees two float64 ops per step that a Mac
never runs: no float64 finding. ``--f64`` adds a float64 running mean of the script's own,
which a Mac refuses: that one is still reported, at its line.
"""
import sys

import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
scaler = torch.amp.GradScaler("cpu")
ema = torch.zeros(32, dtype=torch.float64) if "--f64" in sys.argv else None
for step in range(40):
    x = torch.randn(16, 32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(x)
        loss = nn.functional.mse_loss(out.float(), x)
    opt.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    if ema is not None:
        ema = 0.9 * ema + 0.1 * out.detach().double().mean(0)  # float64 of the script's own
print(f"loss {loss.item():.4f} scale {scaler.get_scale()}")
