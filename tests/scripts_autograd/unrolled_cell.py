"""Backpropagation through a recurrent cell unrolled over many time steps, never truncated:
a step of ~55 tiny ops per time step (a deep autograd graph, ~2 µs an op on a CPU).

Written as such scripts are: a GRUCell in a Python loop over the sequence, the loss on the
last hidden state, Adam. T (time steps, default 2000) and ITERS (default 6) from the
environment; prints its losses so a profiled run can be compared with a plain one."""

import os

import torch
from torch import nn

torch.manual_seed(0)
T = int(os.environ.get("T", "2000"))
ITERS = int(os.environ.get("ITERS", "6"))
cell = nn.GRUCell(8, 16)
head = nn.Linear(16, 1)
opt = torch.optim.Adam(list(cell.parameters()) + list(head.parameters()), lr=1e-3)
x = torch.randn(T, 4, 8)
y = torch.randn(4, 1)
for it in range(ITERS):
    h = torch.zeros(4, 16)
    for t in range(T):
        h = cell(x[t], h)
    loss = nn.functional.mse_loss(head(h), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"iter {it}: loss {loss.item():.6f}")
