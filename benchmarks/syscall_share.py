"""How much of the probe's per-step cost is its two system calls per batch, and their after-effects?

The probe's only system calls on the training thread are ``time.thread_time()`` twice per
DataLoader batch (and a run-queue ``pread`` that is mostly skipped, ``probe/cputime.py``).
Alone each costs ~0.6 µs; inside a training step the cost of a call can be several times
that (what it evicts). This runs the MLP of ``step_cost.py`` in one process, in rotated
blocks: bare, bare with two ``thread_time()`` calls per batch, the full probe, and the full
probe with its CPU clock replaced by ``perf_counter`` (no system call; the run-queue read
is then skipped too). Figures: median step wall time and CPU time per step of each block,
and the median over rounds of each variant minus the same round's bare block.

    OMP_NUM_THREADS=1 python benchmarks/syscall_share.py --rounds 20
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("OMP_NUM_THREADS", "1")

import step_cost as sc  # noqa: E402  (beside this file)

from mpsprofiler.probe import cputime  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--width", type=int, default=32)
    args = p.parse_args()
    import torch
    torch.set_num_threads(1)
    loop = sc.Loop(args.width, 64, True)
    loop.block(50, 10)
    orig_next = loop.next_batch
    tt = time.thread_time

    def two_clocks() -> Any:
        tt()
        batch = orig_next()
        tt()
        return batch

    def run(variant: str) -> tuple[float, float]:
        probe = None
        real = cputime._thread_time
        try:
            if variant == "bare + 2 thread_time":
                loop.next_batch = two_clocks  # type: ignore[method-assign]
            elif variant != "bare":
                if variant == "full, no system call":
                    cputime._thread_time = time.perf_counter
                probe = sc.start_probe(sc.ALL - {"terminal"})
            times = loop.block(20, args.steps)
            return statistics.median(times), loop.cpu_per_step
        finally:
            loop.next_batch = orig_next  # type: ignore[method-assign]
            cputime._thread_time = real
            if probe is not None:
                sc.stop_probe(probe)

    variants = ["bare", "bare + 2 thread_time", "full", "full, no system call"]
    got: dict[str, list[tuple[float, float]]] = {v: [] for v in variants}
    for r in range(args.rounds):
        order = variants[r % len(variants):] + variants[:r % len(variants)]
        for v in order:
            got[v].append(run(v))
        print(f"round {r + 1}/{args.rounds}: " + ", ".join(f"{v} {got[v][-1][0] * 1e6:.1f}" for v in variants),
              flush=True)
    print(f"\n{args.rounds} rounds of {args.steps} steps; µs per step, median over rounds [min..max] of the "
          "difference to the round's bare block")
    bare = got["bare"]
    for v in variants:
        for k, what in ((0, "wall"), (1, "cpu")):
            vals = [g[k] * 1e6 for g in got[v]]
            diffs = [(g[k] - b[k]) * 1e6 for g, b in zip(got[v], bare, strict=True)]
            print(f"  {v:<24}{what:<5}{statistics.median(vals):9.1f}   {statistics.median(diffs):+7.1f} "
                  f"[{min(diffs):+7.1f} .. {max(diffs):+7.1f}]")


if __name__ == "__main__":
    main()
