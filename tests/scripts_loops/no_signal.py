"""A loop that nothing can count: evolution strategies on a tensor, no autograd at all."""
import time

import torch

torch.manual_seed(0)
w = torch.zeros(16)
target = torch.randn(16)
deadline = time.perf_counter() + float(__import__("os").environ.get("SECONDS_", "3.2"))
generations = 0
while time.perf_counter() < deadline:
    noise = torch.randn(32, 16)
    scores = -((w + 0.1 * noise - target) ** 2).sum(1)
    w += 0.01 * (noise * (scores - scores.mean()).unsqueeze(1)).mean(0)
    generations += 1
    time.sleep(0.01)
print("generations", generations > 0)
