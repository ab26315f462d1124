"""A small MLP trained with autograd's anomaly detection on: ``--form set`` calls
``torch.autograd.set_detect_anomaly(True)`` once (a line left from a debugging session),
``--form with`` wraps every backward pass in ``torch.autograd.detect_anomaly()``, ``--form
debug_once`` checks one batch under it before training and trains with it off (clean),
``--form off`` never turns it on (clean). Synthetic data, a few seconds; CPU unless
``--device cuda`` (tests/e2e/test_gpu.py: there each NaN check is a device sync)."""

import argparse
import warnings

import torch
from torch import nn

p = argparse.ArgumentParser()
p.add_argument("--form", choices=["set", "with", "debug_once", "off"], default="set")
p.add_argument("--steps", type=int, default=40)
p.add_argument("--device", default="cpu")
args = p.parse_args()
warnings.filterwarnings("ignore", message="Anomaly Detection has been enabled")
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1)).to(args.device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x_all, y_all = torch.randn(512, 32, device=args.device), torch.randn(512, 1, device=args.device)

if args.form == "set":
    torch.autograd.set_detect_anomaly(True)
if args.form == "debug_once":
    with torch.autograd.detect_anomaly():
        probe_loss = nn.functional.mse_loss(model(x_all[:8]), y_all[:8])
        probe_loss.backward()
    model.zero_grad()

for step in range(args.steps):
    i = (step * 16) % 512
    x, y = x_all[i:i + 16], y_all[i:i + 16]
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    if args.form == "with":
        with torch.autograd.detect_anomaly():
            loss.backward()
    else:
        loss.backward()
    opt.step()
print(f"final loss {loss.item():.5f} anomaly {torch.is_anomaly_enabled()}")
