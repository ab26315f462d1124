"""A trainer that keeps each step's activations "for inspection" in a dict keyed by the step:
`self.cache[self.global_step] = h` keeps every step's tensor and its graph. `.detach()` alone
frees the graph but not the tensors (a new key every step); the fix bounds the dict where the
key is set. `--bounded` runs that fix (the clean run: memory flat)."""
import sys

import torch
from torch import nn


class Trainer:
    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        self.cache = {}
        self.global_step = 0

    def training_step(self, x: torch.Tensor) -> torch.Tensor:
        h = self.model[1](self.model[0](x))
        if "--bounded" in sys.argv:
            self.cache[self.global_step] = h.detach()
            while len(self.cache) > 4:
                self.cache.pop(next(iter(self.cache)))
        else:
            self.cache[self.global_step] = h
        loss = ((self.model[2](h) - x) ** 2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        self.global_step += 1
        return loss


torch.manual_seed(0)
trainer = Trainer(nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 64)))
for _ in range(40):
    loss = trainer.training_step(torch.randn(64, 64))
print("steps", trainer.global_step, "cached", len(trainer.cache), "loss", round(loss.item(), 3))
