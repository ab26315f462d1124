"""Python-level calls per step that the full probe adds, by function (``sys.setprofile``
over 50 steps of the MLP of ``step_cost.py``, probe on against probe off, after 200 warm
steps each): where a per-step cost that differs between machines or Python versions goes.

    OMP_NUM_THREADS=1 python benchmarks/probe_call_count.py [--width 32]
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

        def profile(frame: Any, event: str, arg: Any) -> None:
            if event == "call":
                calls[(frame.f_code.co_filename.split("/")[-1], frame.f_code.co_name)] += 1
            elif event == "c_call":
                calls[("C", getattr(arg, "__qualname__", str(arg)))] += 1

        sys.setprofile(profile)
        try:
            loop.block(0, STEPS)
        finally:
            sys.setprofile(None)
        return calls
    finally:
        if probe is not None:
            sc.stop_probe(probe)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--width", type=int, default=32)
    p.add_argument("--top", type=int, default=40)
    args = p.parse_args()
    loop = sc.Loop(args.width, 64, True)
    bare, full = count(loop, False), count(loop, True)
    added = {k: (full[k] - bare.get(k, 0)) / STEPS for k in full if full[k] != bare.get(k, 0)}
    python = sum(v for k, v in added.items() if k[0] != "C")
    native = sum(v for k, v in added.items() if k[0] == "C")
    print(f"added per step: {python:.1f} Python calls, {native:.1f} C calls")
    for (where, name), n in sorted(added.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"{n:6.2f}  {where}: {name}")


if __name__ == "__main__":
    main()
