"""Python-level calls per step that the full probe adds, by function (``sys.setprofile``
over 50 steps of the MLP of ``step_cost.py``, probe on against probe off, after 200 warm
steps each): where a per-step cost that differs between machines or Python versions goes.

    OMP_NUM_THREADS=1 python benchmarks/probe_call_count.py [--width 32]
    OMP_NUM_THREADS=1 python benchmarks/probe_call_count.py --framework lightning   # or hf (~1 min)

``--framework`` counts ``fw_workload.py``'s loop of that framework instead: steps 150-200
(``--start``), each run's Trainer built after the probe's start as under ``mpsprof run``;
the framework's own step-end callback opens and closes the window, so what the framework
does between two optimizer steps (its hooks, ``self.log``, the optimizer closure) is in
both counts and the difference is the probe's.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("OMP_NUM_THREADS", "1")

import step_cost as sc  # noqa: E402  (beside this file)

STEPS = 50


def count(loop: sc.Loop, probe_on: bool) -> collections.Counter[tuple[str, str]]:
    probe = sc.start_probe(sc.ALL - {"terminal"}) if probe_on else None
    try:
        loop.block(200, 10)  # past the early op samples
        calls: collections.Counter[tuple[str, str]] = collections.Counter()
        sys.setprofile(_profiler(calls))
        try:
            loop.block(0, STEPS)
        finally:
            sys.setprofile(None)
        return calls
    finally:
        if probe is not None:
            sc.stop_probe(probe)


def _profiler(calls: collections.Counter[tuple[str, str]]) -> Any:
    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            calls[(frame.f_code.co_filename.split("/")[-1], frame.f_code.co_name)] += 1
        elif event == "c_call":
            calls[("C", getattr(arg, "__qualname__", str(arg)))] += 1

    return profile


def count_framework(framework: str, start: int, probe_on: bool) -> collections.Counter[tuple[str, str]]:
    """The calls of optimizer steps ``start`` to ``start + STEPS`` of a framework's loop."""
    import fw_workload
    import torch

    torch.manual_seed(0)
    calls: collections.Counter[tuple[str, str]] = collections.Counter()
    profile = _profiler(calls)

    def step_end(global_step: int) -> None:
        if global_step == start:
            sys.setprofile(profile)
        elif global_step == start + STEPS:
            sys.setprofile(None)

    probe = sc.start_probe(sc.ALL - {"terminal", "memory"}) if probe_on else None  # the sampler wakes by the clock
    try:
        (fw_workload.lightning if framework == "lightning" else fw_workload.hf)(start + STEPS + 2, step_end)
    finally:
        sys.setprofile(None)
        if probe is not None:
            sc.stop_probe(probe)
    return calls


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--width", type=int, default=32)
    p.add_argument("--top", type=int, default=40)
    p.add_argument("--framework", choices=["lightning", "hf"], help="count this framework's loop (fw_workload.py)")
    p.add_argument("--start", type=int, default=150, help="--framework: the first counted optimizer step")
    args = p.parse_args()
    if args.framework:
        bare, full = (count_framework(args.framework, args.start, on) for on in (False, True))
        steps_of_bare = sum(bare.values()) / STEPS
        python_bare = sum(v for k, v in bare.items() if k[0] != "C") / STEPS
        print(f"{args.framework}, bare: {python_bare:.0f} Python and {steps_of_bare - python_bare:.0f} C calls per step")
    else:
        loop = sc.Loop(args.width, 64, True)
        bare, full = count(loop, False), count(loop, True)
    added = {k: (full.get(k, 0) - bare.get(k, 0)) / STEPS for k in {*full, *bare} if full.get(k, 0) != bare.get(k, 0)}
    python = sum(v for k, v in added.items() if k[0] != "C")
    native = sum(v for k, v in added.items() if k[0] == "C")
    print(f"added per step: {python:.1f} Python calls, {native:.1f} C calls")
    for (where, name), n in sorted(added.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"{n:6.2f}  {where}: {name}")


if __name__ == "__main__":
    main()
