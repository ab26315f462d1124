"""Bytecodes and Python calls a batch in the probe's DataLoader path, counted by tracing.

Why: the DataLoader hooks are the largest rung of ``step_instructions.py --ladder`` (issue
34), and what they cost is the Python they run at every batch. A count of the bytecodes
executed and the functions entered does not depend on the machine's load, and it names
the functions, where callgrind's rung is one figure that moves by ~10 k instructions
between runs (benchmarks/RESULTS.md, session 54).

The MLP loop of ``step_cost.py`` (a loader built after the probe, as under ``mpsprof run``,
so every batch reaches the per-loader sums), the ``+ DataLoader hooks`` rung's instruments
(no op accounting, no memory sampler). ``WARM`` steps run first, untraced: past
``cputime.EXACT_FETCHES`` fetches, where an untraced run's fetches (~0.2 ms here, far under
``cputime.READ_AFTER``) have their clocks read one in ``READ_EVERY`` (``READ_GAPS`` apart).
Tracing makes fetches tens of times longer, which could read them at every fetch:
``LONG_FETCH`` and ``READ_AFTER`` are set out of reach while counting, so the count follows
the untraced run's schedule (``--long-fetches`` keeps them: the clocks' upper bound). Where
a version folds the per-loader sums on the channel thread (``LoaderSites.fold``), that fold's
bytecodes a batch are counted apart: off the training thread, but on a one-core machine
still the training's CPU.

    OMP_NUM_THREADS=1 python benchmarks/loader_path_bytecodes.py
    OMP_NUM_THREADS=1 PYTHONPATH=/tmp/old python benchmarks/loader_path_bytecodes.py   # another version
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
from types import FrameType
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
WARM = 300
RUNG = "+ DataLoader hooks"


def count(steps: int, long_fetches: bool) -> tuple[collections.Counter[str], collections.Counter[str]]:
    """Bytecodes and calls by function over ``steps`` steps, inside the DataLoader wrapper."""
    sys.path.insert(0, HERE)
    import step_cost as sc

    import mpsprofiler

    package = os.path.dirname(os.path.abspath(mpsprofiler.__file__)) + os.sep
    enabled = dict(sc.LADDER)[RUNG]
    assert enabled is not None
    probe = sc.start_probe(enabled - {"memory", "terminal"})
    loop = sc.Loop(32, 64, True)
    loop.block(WARM, 1)
    from torch.utils.data import dataloader as dl

    wrapper = dl._BaseDataLoaderIter.__next__.__code__
    if not long_fetches:
        sc.out_of_reach(("LONG_FETCH", "READ_AFTER"), ("mpsprofiler",))
    ops, calls = by_function(lambda: loop.block(0, steps), package, wrapper)
    sc.stop_probe(probe)
    return ops, calls


def by_function(fn: Any, package: str, within: Any = None) -> tuple[collections.Counter[str], collections.Counter[str]]:
    """Bytecodes and calls by function of ``package``'s functions while ``fn()`` runs on this
    thread (``within``: only inside calls of that code object)."""
    ops: collections.Counter[str] = collections.Counter()
    calls: collections.Counter[str] = collections.Counter()
    inside = [0 if within is not None else 1]

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "opcode":
            ops[frame.f_code.co_qualname] += 1
        elif event == "return" and frame.f_code is within:
            inside[0] -= 1
        return local

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        code = frame.f_code
        if code is within:
            inside[0] += 1
        if not inside[0] or not code.co_filename.startswith(package):
            return None
        calls[code.co_qualname] += 1
        frame.f_trace_opcodes = True
        return local

    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(None)
    return ops, calls


def fold_count(batches: int) -> float | None:
    """Bytecodes a batch of ``LoaderSites.fold`` (the channel thread's share of the per-loader
    sums, where a version folds them there; None where it has no fold): ``batches`` batches
    of one iterator logged untraced, then one fold traced, as the channel thread runs it."""
    from mpsprofiler.probe import loader_sites

    if not hasattr(loader_sites.LoaderSites, "fold"):
        return None

    class Iterator:
        def __init__(self) -> None:
            self._num_yielded = 0

        def _next_index(self) -> int:
            return 0

    sites = loader_sites.LoaderSites(lambda d: None, lambda: 0)
    loader = type("Loader", (), {})()
    sites._sites[loader] = loader_sites.Site(1, "train.py", 1)
    it = Iterator()
    sites.on_iter(it, loader, {"created": 1})
    for k in range(WARM + batches):
        if k == WARM:
            sites.fold()  # the warm batches folded untraced
        it._num_yielded += 1
        sites.on_fetch(it, 4e-5, (0, 1), k * 5e-4, k)
        timer = it.__dict__.get("_next_index")
        if timer is not None:
            timer()
    return traced_opcodes(sites.fold) / batches


def traced_opcodes(fn: Any) -> int:
    """The bytecodes ``fn()`` executes on this thread, in every function it calls."""
    ops = [0]

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "opcode":
            ops[0] += 1
        return local

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        return local

    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(None)
    return ops[0]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=800)
    p.add_argument("--long-fetches", action="store_true",
                   help="leave cputime.LONG_FETCH and READ_AFTER as they are (traced fetches may all be read)")
    args = p.parse_args()
    ops, calls = count(args.steps, args.long_fetches)
    n = args.steps
    import mpsprofiler

    print(f"{mpsprofiler.__file__}: DataLoader path, {n} batches after {WARM}")
    print(f"  bytecodes a batch {sum(ops.values()) / n:.1f}, Python calls a batch {sum(calls.values()) / n:.2f}")
    for name, k in ops.most_common():
        print(f"  {name:45s} {k / n:7.1f} bytecodes  {calls[name] / n:5.2f} calls")
    folded = fold_count(n)
    if folded is not None:
        print(f"  the per-loader sums' fold (the channel thread, LoaderSites.fold): {folded:.1f} bytecodes a batch")


if __name__ == "__main__":
    main()
