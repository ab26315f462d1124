"""Trigger for `long-warmup`: the first steps are slow because every new input shape
compiles new kernels (Metal does this on a Mac; CUDA autotuning and caches behave alike).

The compile is simulated (a pause the first time a shape is seen) so the script shows
the same warm-up on any machine: four sequence-length buckets, then steady steps.
Timing the whole loop would misjudge the speed; mpsprof says from which step to time.
"""

from __future__ import annotations

import time

import torch
from torch import nn

COMPILE_S = 0.3
_compiled: set[tuple[int, ...]] = set()


def run_kernel(x: torch.Tensor) -> torch.Tensor:
    if tuple(x.shape) not in _compiled:  # first use of this shape: "compile" it
        time.sleep(COMPILE_S)
        _compiled.add(tuple(x.shape))
    return x


def main() -> None:
    model = nn.Linear(32, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    lengths = [16, 24, 32, 40] + [16, 24, 32, 40] * 7
    for length in lengths:
        x = torch.randn(8, length, 32)
        loss = run_kernel(model(x)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        busy_until = time.perf_counter() + 0.01  # the rest of a real step
        while time.perf_counter() < busy_until:
            pass
    print(f"{len(lengths)} steps, {len(_compiled)} shapes compiled")


if __name__ == "__main__":
    main()
