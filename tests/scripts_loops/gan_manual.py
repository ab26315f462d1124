"""A GAN-style loop with manual updates: three backward passes per iteration (the
critic on real and fake data, then the generator) and a gradient penalty through
torch.autograd.grad; no optimizer, no DataLoader. ITERS iterations."""
import os

import torch

ITERS = int(os.environ.get("ITERS", "12"))
torch.manual_seed(0)
G = torch.nn.Linear(4, 8)
D = torch.nn.Linear(8, 1)


def update(module, lr=0.01):
    with torch.no_grad():
        for p in module.parameters():
            p -= lr * p.grad
            p.grad = None


for it in range(ITERS):
    real = torch.randn(16, 8, requires_grad=True)
    out = D(real).mean()
    (gp,) = torch.autograd.grad(out, real, create_graph=True)
    (-(out) + 0.1 * gp.pow(2).mean()).backward()
    fake = G(torch.randn(16, 4)).detach()
    D(fake).mean().backward()
    update(D)
    (-D(G(torch.randn(16, 4))).mean()).backward()
    update(G)
    D.zero_grad()
print("iterations", ITERS)
