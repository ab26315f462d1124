"""Lightning-shaped, without Lightning: the loop holds the module only through its own list
(as Lightning's loop does, so no user frame has it at a step boundary); a callback class of
the same file keeps numbers in a `self.outs` of its own; the module keeps a number per step
in `self.losses`, then its logits (with their graphs) in `self.outs`: the leak."""

import sys

import torch
from torch import nn


class LossHistory:
    """A callback: a number per step."""

    def __init__(self):
        self.outs = []

    def on_train_batch_end(self, loss):
        self.outs.append(loss.item())


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 8))
        self.losses = []
        self.outs = []

    def training_step(self, x, y):
        logits = self.net(x)
        loss = nn.functional.cross_entropy(logits, y)
        self.losses.append(loss.item())
        self.outs.append(logits)
        return loss


def fit(modules, callbacks, steps):
    opt = torch.optim.SGD(modules[0].parameters(), lr=0.01)
    for _ in range(steps):
        loss = modules[0].training_step(torch.randn(64, 64), torch.randint(0, 8, (64,)))
        opt.zero_grad()
        loss.backward()
        opt.step()
        for callback in callbacks:
            callback.on_train_batch_end(loss)
    print(f"kept {len(modules[0].outs)}")


if __name__ == "__main__":
    torch.manual_seed(0)
    fit([Classifier()], [LossHistory()], int(sys.argv[1]) if len(sys.argv) > 1 else 240)
