"""Bytecodes and Python calls a step in the probe's own functions, counted by tracing.

Why: what the probe's hooks cost a steady training step is the Python they run (issue 34:
~50 us of the MLP "1 ms" step's +5.9%). A count of the bytecodes executed and the functions
entered does not depend on the machine's load and names the functions, where a timed or
callgrind figure moves with the machine and the heap's state (benchmarks/RESULTS.md,
session 56). ``loader_path_bytecodes.py`` counts the DataLoader path alone; this counts every
function of the ``mpsprofiler`` package that runs on the training thread during a step.

The MLP loop of ``step_cost.py`` at width 32 (its DataLoader built after the probe, as under
``mpsprof run``), every instrument but the memory sampler and the terminal, and without op
accounting unless ``--ops`` (its samples are its own budget, reported by each run; between
them its step-boundary work and leak checks count). ``WARM`` steps run first, untraced (past
the backward sampling's warm-up and the first 256 batches whose clocks are all read); then
``--steps`` steps are traced. ``LONG_FETCH`` and the run-queue thresholds are set out of reach
while counting, so a traced fetch (far longer than an untraced one) follows an untraced quiet
run's schedule (``step_cost.out_of_reach``).

    OMP_NUM_THREADS=1 python benchmarks/step_bytecodes.py [--ops [--steady]] [--steps 700]
    OMP_NUM_THREADS=1 PYTHONPATH=/tmp/old python benchmarks/step_bytecodes.py   # another version
"""

from __future__ import annotations

import argparse
import collections
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
WARM = 300


def count(steps: int, ops: bool, warm: int = WARM,
          steady: bool = False) -> tuple[collections.Counter[str], collections.Counter[str]]:
    """Bytecodes and calls by function of the probe's package over ``steps`` traced steps;
    ``steady``: op accounting's next sample, leak check, outlier and drift wakes put past the window
    (a steady step between them: its per-step work only)."""
    sys.path.insert(0, HERE)
    import step_cost as sc

    import mpsprofiler

    package = os.path.dirname(os.path.abspath(mpsprofiler.__file__)) + os.sep
    enabled = sc.ALL - {"memory", "terminal"} - (set() if ops else {"ops"})
    probe = sc.start_probe(frozenset(enabled))
    loop = sc.Loop(32, 64, True)
    loop.block(warm, 1)
    sc.out_of_reach(packages=("mpsprofiler",))
    if steady and probe.ops is not None:
        # (and no outlier: a traced step lasts ~10 times an untraced one, so every step would
        # be one and wake sampling, which an untraced run's steps do not)
        sched = probe.ops.schedule
        sched.next_sample = sched.wake_above = probe.ops._leaks.next_check = float("inf")
        sched._drift_ref = 0.0  # (nor a drift wake: the traced steps' median is not the untraced one's)
    from loader_path_bytecodes import by_function

    codes, calls = by_function(lambda: loop.block(0, steps), package)
    sc.stop_probe(probe)
    return codes, calls


def fold_count(steps: int) -> float:
    """Bytecodes a step of the tracker's fold (``StepTracker._fold``: the channel thread's
    share, off the training thread; on a one-core machine still the training's CPU): a step
    of one fetch each, as in the loop above, ``steps`` closed untraced, then one fold traced."""
    from mpsprofiler.devices.cpu import CpuBackend
    from mpsprofiler.probe.steps import StepTracker

    now = [0.0]
    tracker = StepTracker(lambda *a, **k: None, CpuBackend(), lambda: now[0])
    optimizer = type("Optimizer", (), {"param_groups": [{"params": [object()]}]})()
    for k in range(WARM + steps):
        if k == WARM:
            tracker.drain(send=False)  # the warm steps folded untraced
        started = tracker.on_fetch_start()
        now[0] += 4e-5
        tracker.on_fetch_end(started, True)
        now[0] += 5e-4
        tracker.on_optimizer_step(optimizer)
    from loader_path_bytecodes import traced_opcodes

    return traced_opcodes(lambda: tracker.drain(send=False)) / steps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=700, help="traced steps (700: a multiple of 7 and of 64-ish spans)")
    p.add_argument("--warm", type=int, default=WARM)
    p.add_argument("--ops", action="store_true", help="op accounting on too")
    p.add_argument("--steady", action="store_true",
                   help="with --ops: no op sample and no leak check in the window (their cost is amortized apart)")
    p.add_argument("--top", type=int, default=30)
    args = p.parse_args()
    codes, calls = count(args.steps, args.ops, args.warm, args.steady)
    n = args.steps
    import mpsprofiler

    print(f"{mpsprofiler.__file__}: {n} steps after {args.warm}, op accounting {'on' if args.ops else 'off'}"
          f"{' (no sample, no leak check)' if args.steady else ''}")
    print(f"  bytecodes a step {sum(codes.values()) / n:.1f}, Python calls a step {sum(calls.values()) / n:.2f}")
    for name, k in codes.most_common(args.top):
        print(f"  {name:50s} {k / n:7.1f} bytecodes  {calls[name] / n:5.2f} calls")
    print(f"  the step rows' fold (the channel thread, StepTracker._fold): {fold_count(n):.1f} bytecodes a step")


if __name__ == "__main__":
    main()
