"""Backward passes the step counter once lost (issues 27 and 33): ``deep`` is issue 27's
reproducer (100 ops between the parameter and the loss), ``tail`` has 40 ops after the
last parameter, ``checkpoint`` recomputes through ``checkpoint(use_reentrant=True)``
(a backward pass inside the backward pass), ``compiled`` is ``torch.compile(backend=
"aot_eager")``. Each prints the number of optimizer steps it took."""

import sys

import torch
import torch.utils.checkpoint

mode = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
torch.manual_seed(0)
x = torch.randn(8)
if mode == "deep":
    w = torch.nn.Parameter(torch.ones(8))
    opt = torch.optim.SGD([w], lr=0.01)
    for step in range(steps):
        opt.zero_grad()
        h = x * w
        for _ in range(100):
            h = h * 1.001
        h.sum().backward()
        opt.step()
elif mode == "tail":
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(steps):
        opt.zero_grad()
        h = model(x)
        for _ in range(40):
            h = torch.tanh(h) + 0.001
        h.sum().backward()
        opt.step()
elif mode == "checkpoint":
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(steps):
        opt.zero_grad()
        out = torch.utils.checkpoint.checkpoint(model, x.requires_grad_(), use_reentrant=True)
        out.sum().backward()
        opt.step()
elif mode == "compiled":
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    compiled = torch.compile(model, backend="aot_eager")
    for step in range(steps):
        opt.zero_grad()
        compiled(x).sum().backward()
        opt.step()
print(f"{mode}: {steps} optimizer steps")
