"""What a dispatch mode costs an op, against what op accounting's recording costs, in one process.

Why: a sampled step's cost is op accounting's fixed cost in every run (the forced first sample:
~35 ms on nanoGPT, 0.2% of a 2,000-step run). This splits an op's cost into what any
``TorchDispatchMode`` pays (torch calling back into Python, and torch 2.6+'s
``_disable_dynamo`` wrapper around every mode's ``__torch_dispatch__``) and what the recording
adds (``OpAccountant`` sampling every step). CPU time of this thread, medians of interleaved
blocks, so a loaded machine moves it less than wall time.

    OMP_NUM_THREADS=1 python benchmarks/dispatch_mode_cost.py --model gpt --rounds 6
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import ops_overhead  # beside this file (the script's folder is on sys.path)
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from mpsprofiler.probe.ops import OpAccountant


class Plain(TorchDispatchMode):
    """A mode that only runs the op; torch 2.6+ wraps it in ``_disable_dynamo`` (if Dynamo is loaded)."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return func(*args, **(kwargs or {}))


class Unwrapped(TorchDispatchMode):
    """The same, without torch's wrapper (``_should_skip_dynamo`` False)."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return func(*args, **(kwargs or {}))


def block(step: Callable[[], None], n: int, ctx: Callable[[], Any] | None = None) -> float:
    """Median CPU seconds of ``n`` steps, each inside ``ctx()`` if given."""
    times = []
    for _ in range(n):
        t0 = time.thread_time()
        with ctx() if ctx is not None else contextlib.nullcontext():
            step()
        times.append(time.thread_time() - t0)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="gpt", choices=sorted(ops_overhead.MODELS))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=15)
    args = p.parse_args()
    torch.manual_seed(0)
    step = ops_overhead.MODELS[args.model](torch.device("cpu"))
    for _ in range(5):
        step()
    count = [0]

    class Count(Unwrapped):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            count[0] += 1
            return func(*args, **(kwargs or {}))

    with Count():
        step()
    ops = count[0]
    print(f"{args.model}: {ops} ops a step; torch {torch.__version__}; Dynamo loaded: {'torch._dynamo' in sys.modules}")
    rows: dict[str, list[float]] = {"plain mode": [], "plain mode, no Dynamo wrapper": [], "op accounting": []}
    for r in range(args.rounds):
        bare = block(step, args.steps)
        plain = block(step, args.steps, Plain)
        unwrapped = block(step, args.steps, Unwrapped)
        acct = OpAccountant(lambda kind, **f: None, every_step=True)
        with ops_overhead.driven(acct):
            block(step, 2)
            sampled = block(step, args.steps)
        for name, t in zip(rows, (plain, unwrapped, sampled), strict=True):
            rows[name].append((t - bare) / ops * 1e6)
        print(f"  round {r + 1}: bare {bare * 1e3:.2f} ms; " +
              ", ".join(f"{name} +{values[-1]:.1f} µs/op" for name, values in rows.items()))
    for name, values in rows.items():
        print(f"{name:32s} +{statistics.median(values):5.1f} µs an op (median of {len(values)}; {min(values):.1f} .. {max(values):.1f})")


if __name__ == "__main__":
    main()
