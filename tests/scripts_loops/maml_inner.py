"""MAML on sine regression (Finn et al.'s toy task): per meta-iteration, 4 tasks of 5 inner
SGD steps each, their gradients taken with `torch.autograd.grad(..., create_graph=True)` so
the meta-update backpropagates through them (`torch.func.functional_call` with the adapted
parameters), then one `meta_opt.step()`. The 20 inner passes of the first meta-iteration came
before any optimizer step, and each repeat of their line closed a step (170 of 150); a step
boundary inside a meta-iteration then read the meta-loss, summed over its tasks, as "keeps
every step's autograd graph alive" (graph-kept-across-steps)."""
import math
import os

import torch
from torch import nn
from torch.func import functional_call

torch.manual_seed(0)
META_ITERS = int(os.environ.get("META_ITERS", "40"))
model = nn.Sequential(nn.Linear(1, 40), nn.ReLU(), nn.Linear(40, 40), nn.ReLU(), nn.Linear(40, 1))
meta_opt = torch.optim.Adam(model.parameters(), lr=1e-3)


def task_batch(n=10):
    amp, phase = torch.rand(1) * 4.9 + 0.1, torch.rand(1) * math.pi
    x = torch.rand(2 * n, 1) * 10 - 5
    y = amp * torch.sin(x + phase)
    return x[:n], y[:n], x[n:], y[n:]


updates = 0
for it in range(META_ITERS):
    meta_loss = 0.0
    for _ in range(4):
        xs, ys, xq, yq = task_batch()
        params = dict(model.named_parameters())
        for _ in range(5):
            inner = nn.functional.mse_loss(functional_call(model, params, (xs,)), ys)
            grads = torch.autograd.grad(inner, list(params.values()), create_graph=True)
            params = {k: p - 0.01 * g for (k, p), g in zip(params.items(), grads, strict=True)}
        meta_loss = meta_loss + nn.functional.mse_loss(functional_call(model, params, (xq,)), yq)
    meta_opt.zero_grad()
    (meta_loss / 4).backward()
    meta_opt.step()
    updates += 1
print("optimizer steps", updates)
