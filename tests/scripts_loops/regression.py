"""pytorch/examples ``regression``-style: fit a polynomial with manual SGD updates.

No optimizer and no DataLoader: ``param.data.add_(-lr * param.grad)`` after each
``backward()``. Stops when the loss is small or after MAX_BATCHES updates, and prints
how many updates it made, like the original.
"""
import os
from itertools import count

import torch
import torch.nn.functional as F

POLY_DEGREE = 4
MAX_BATCHES = int(os.environ.get("MAX_BATCHES", "40"))
torch.manual_seed(0)
W_target = torch.randn(POLY_DEGREE, 1) * 5
b_target = torch.randn(1) * 5


def make_features(x):
    x = x.unsqueeze(1)
    return torch.cat([x ** i for i in range(1, POLY_DEGREE + 1)], 1)


def f(x):
    return x.mm(W_target) + b_target.item()


def get_batch(batch_size=32):
    random = torch.randn(batch_size)
    x = make_features(random)
    return x, f(x)


fc = torch.nn.Linear(W_target.size(0), 1)
for batch_idx in count(1):
    batch_x, batch_y = get_batch()
    fc.zero_grad()
    output = F.smooth_l1_loss(fc(batch_x), batch_y)
    loss = output.item()
    output.backward()
    for param in fc.parameters():
        param.data.add_(-0.1 * param.grad)
    if loss < 1e-3 or batch_idx >= MAX_BATCHES:
        break
print(f"Loss: {loss:.6f} after {batch_idx} batches")
