"""Feature extraction while training: forward hooks store every block's output in a dict of
lists (``activations.setdefault(name, []).append(out)``), not detached, never cleared. The
tensors are made inside the model (the line of ``model(x)``); the line that keeps them is the
hook's append.

    python hook_activations.py [--steps 60]
"""
import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=60)
args = parser.parse_args()
torch.manual_seed(0)
activations = {}


def save_activation(name):
    def hook(module, inputs, out):
        activations.setdefault(name, []).append(out)
    return hook


model = nn.Sequential(*[nn.Sequential(nn.Linear(256, 256), nn.ReLU()) for _ in range(3)], nn.Linear(256, 10))
for i, block in enumerate(model[:3]):
    block.register_forward_hook(save_activation(f"block{i}"))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(args.steps):
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"kept {sum(len(v) for v in activations.values())} activations")
