"""A custom autograd.Function (a swish with a learnable beta and its own backward), checked
with torch.autograd.gradcheck before training, as the "Extending PyTorch" docs page advises,
then trained.

Env: MANUAL=1 updates the parameters by hand (no optimizer: backward passes count the steps).
Prints ``updates N``.
"""

import os

import torch
from torch import nn

MANUAL = os.environ.get("MANUAL") == "1"


class Swish(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, beta):
        s = torch.sigmoid(beta * x)
        ctx.save_for_backward(x, s, beta)
        return x * s

    @staticmethod
    def backward(ctx, grad):
        x, s, beta = ctx.saved_tensors
        dx = s + beta * x * s * (1 - s)
        dbeta = (x * x * s * (1 - s) * grad).sum().reshape(beta.shape)
        return grad * dx, dbeta


class Net(nn.Module):
    def __init__(self, depth=6, d=16):
        super().__init__()
        self.lins = nn.ModuleList(nn.Linear(d, d) for _ in range(depth))
        self.betas = nn.Parameter(torch.ones(depth, 1))
        self.out = nn.Linear(d, 3)

    def forward(self, x):
        for i, lin in enumerate(self.lins):
            x = Swish.apply(lin(x), self.betas[i])
        return self.out(x)


def main():
    torch.manual_seed(0)
    x = torch.randn(8, 6, dtype=torch.double, requires_grad=True)
    beta = torch.ones(1, dtype=torch.double, requires_grad=True)
    assert torch.autograd.gradcheck(Swish.apply, (x, beta))
    net = Net()
    opt = None if MANUAL else torch.optim.SGD(net.parameters(), lr=0.05)
    data = torch.randn(256, 16)
    target = data[:, :3].argmax(1)
    updates = 0
    for epoch in range(2):
        for i in range(0, 256, 32):
            loss = nn.functional.cross_entropy(net(data[i:i + 32]), target[i:i + 32])
            net.zero_grad()
            loss.backward()
            if opt is not None:
                opt.step()
            else:
                with torch.no_grad():
                    for p in net.parameters():
                        p -= 0.05 * p.grad
            updates += 1
    print(f"updates {updates}")


if __name__ == "__main__":
    main()
