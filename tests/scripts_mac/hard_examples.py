"""Online hard-example mining, as detection and metric-learning loops write it: the targets
are made on the training device, the positives found with ``torch.nonzero``, the hardest
examples picked with a boolean mask, and a CPU-side index (``torch.randint`` without a
device) samples the batch. On a Mac GPU the first two read back from the device (the
mask's count decides the result's size); the CPU-side index stays on the CPU.

    python hard_examples.py [--steps 30]
"""
import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=30)
args = parser.parse_args()
device = "cuda" if torch.cuda.is_available() else ("mps" if torch.backends.mps.is_available() else "cpu")
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 1)).to(device)
opt = torch.optim.Adam(model.parameters(), 1e-3)
pool = torch.randn(4096, 64)
for step in range(args.steps):
    ix = torch.randint(0, len(pool), (128,))
    x = pool[ix].to(device)
    y = (torch.rand(128, device=device) > 0.8).float()
    pos = torch.nonzero(y).squeeze(1)
    per = nn.functional.binary_cross_entropy_with_logits(model(x).squeeze(1), y, reduction="none")
    hard = per[per > per.median()]
    loss = per[pos].mean() + hard.mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    labels = y.long().tolist()  # after the step: a metric's read of the device's targets
    sampled = ix.tolist()  # the CPU-side index: no read from a device
print(f"last loss {loss.item():.4f}, {sum(labels)} positives in the last batch of {len(sampled)}")
