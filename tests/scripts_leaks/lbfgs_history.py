"""Least squares by LBFGS (max_iter=5 per step): its curvature history (``old_dirs``,
``old_stps``, ``ro``: up to history_size entries in ``optimizer.state``) grows every step
and is the optimizer's own, not a leak of the script's ``opt.step(closure)`` line."""

import torch

torch.manual_seed(0)
x = torch.randn(300, 3)
y = x @ torch.tensor([[2.0], [-1.0], [0.5]]) + 0.1 * torch.randn(300, 1)
model = torch.nn.Linear(3, 1)
opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=5)


def closure():
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    return loss


for it in range(20):
    loss = opt.step(closure)
print(f"steps 20 loss {loss.item():.5f}")
