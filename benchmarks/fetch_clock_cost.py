"""What the fetch clock's reads cost a training step: the read after every long fetch
against the read after a long wait only (``probe/cputime.py`` ``READ_AFTER``), in one process.

Why (issue 34, session 61): the clocks of a DataLoader fetch (``time.thread_time()`` and the
run queue's ``pread``: system calls) were read at the fetch after every fetch of at least
``LONG_FETCH`` (200 µs), and a DataLoader without workers that collates 64 samples takes
about that long, so every fetch of such a loop was read. The probe now reads the fetch after
a wait of ``READ_AFTER`` (20 ms) and one in ``READ_EVERY`` (by ``READ_GAPS``) otherwise.

This runs the MLP of ``step_cost.py`` (DataLoader, batch 64) under one full probe and, block
by block in alternating order, sets ``READ_AFTER`` to ``LONG_FETCH`` (the schedule before) or
leaves it (now): the same probe, the same loader, only the reads differ. Figures: per block the
median step time and the thread's CPU time per step; the old schedule less the new, median
and quartiles over the pairs of blocks. It also counts the reads made (``ThreadClock.read``).

    OMP_NUM_THREADS=1 python benchmarks/fetch_clock_cost.py --width 32 --rounds 60
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("OMP_NUM_THREADS", "1")

import step_cost as sc  # noqa: E402  (beside this file)
from counted_schedule import set_thresholds  # noqa: E402

from mpsprofiler.probe import cputime  # noqa: E402

READ_AFTER = cputime.READ_AFTER
"""The threshold as shipped (the blocks set the module's back and forth)."""
SCHEDULES = {"before (after every LONG_FETCH)": cputime.LONG_FETCH, "now (after READ_AFTER)": READ_AFTER}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--width", type=int, default=32, help="MLP width (32: overhead.py's 0.2 ms case, 256: its 1 ms)")
    p.add_argument("--rounds", type=int, default=60)
    p.add_argument("--steps", type=int, default=100, help="timed steps per block")
    args = p.parse_args()
    import torch

    torch.set_num_threads(1)
    loop = sc.Loop(args.width, 64, True)
    probe = sc.start_probe(sc.ALL - {"terminal"})
    reads = [0]
    clock = probe.tracker._thread_clock
    real_read = clock.read

    def counted(now: float) -> tuple[float, float | None]:
        reads[0] += 1
        return real_read(now)

    clock.read = counted
    names = list(SCHEDULES)
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    count: dict[str, int] = dict.fromkeys(names, 0)
    try:
        loop.block(600, 10)  # past the exact first fetches (cputime.EXACT_FETCHES)
        for r in range(args.rounds):
            for name in names if r % 2 else names[::-1]:
                set_thresholds({"READ_AFTER": SCHEDULES[name]})
                before = reads[0]
                times = loop.block(5, args.steps)
                count[name] += reads[0] - before
                wall[name].append(statistics.median(times))
                cpu[name].append(loop.cpu_per_step)
    finally:
        set_thresholds({"READ_AFTER": READ_AFTER})
        sc.stop_probe(probe)
    old, new = names
    print(f"MLP width {args.width}, {args.rounds} rounds of {args.steps} steps a block; step time now "
          f"{statistics.median(wall[new]) * 1e6:.1f} µs")
    for name in names:
        print(f"  {name}: {count[name] / (args.rounds * (args.steps + 5)):.2f} thread-clock reads a fetch (two a fetch read)")
    for label, figures in (("median step time", wall), ("thread CPU a step", cpu)):
        diff = [(a - b) * 1e6 for a, b in zip(figures[old], figures[new], strict=True)]
        q1, q2, q3 = statistics.quantiles(diff, n=4)
        print(f"  before less now, {label}: {statistics.median(diff):+.1f} µs a step (quartiles {q1:+.1f} .. "
              f"{q3:+.1f}); {statistics.median(diff) / (statistics.median(figures[new]) * 1e6) * 100:+.2f}% of a step")


if __name__ == "__main__":
    main()
