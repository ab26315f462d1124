"""CPU time of one memory sample (``MemorySampler.sample``), an older sampler beside this one.

The sampler runs at the channel's wakes (every 0.5 s), holding the GIL the training needs
for most of its work, so its CPU time is taken from the training (issue 34). Both samplers
run in this one process, in alternating rounds, so both see the same machine and the same
process tree; the figure is the sampling thread's CPU time (``time.thread_time``) over
``--samples`` samples, the median of ``--rounds``: load-independent, unlike wall time.
Two trees: this process alone (the common case: no DataLoader workers), then with a
DataLoader's 2 workers alive (persistent, idle between batches).

The older sampler is ``mpsprofiler/probe/sampler.py`` at ``--old`` (a git revision of this
repository: 42b38ff, before the direct ``/proc`` reader), loaded into this package so that
both use the same helpers. Each tree's last line compares the two samplers' fields: those
that are not clocks must be equal (read old, new, old: where both old readings agree).

    OMP_NUM_THREADS=1 python benchmarks/sample_cost.py [--samples 200] [--rounds 5] [--old 42b38ff]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mpsprofiler.probe import sampler as new_module  # noqa: E402

NOT_CLOCKS = ("rss", "rss_children", "workers", "sys_total", "sys_available", "swap_used")
"""The fields two readings a moment apart agree on (on a quiet process); the others count time."""


def old_module(rev: str) -> ModuleType:
    """``mpsprofiler/probe/sampler.py`` at ``rev``, as a module of this package."""
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:mpsprofiler/probe/sampler.py"],
                            check=True, capture_output=True, text=True).stdout
    spec = importlib.util.spec_from_loader("mpsprofiler.probe._sampler_old", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "mpsprofiler.probe"
    exec(compile(source, f"{rev}:sampler.py", "exec"), module.__dict__)
    return module


def make(module: ModuleType) -> tuple[Any, list[dict[str, Any]]]:
    sent: list[dict[str, Any]] = []
    sampler = module.MemorySampler(lambda kind, **fields: sent.append(fields), lambda: None,
                                   time.monotonic, lambda exc: None)
    return sampler, sent


def cpu_per_sample(sampler: Any, samples: int) -> float:
    t0 = time.thread_time()
    for _ in range(samples):
        sampler.sample()
    return (time.thread_time() - t0) / samples


def compare(old: tuple[Any, list[dict[str, Any]]], new: tuple[Any, list[dict[str, Any]]]) -> str:
    """Which non-clock fields the new sampler reads as the old one does (old, new, old)."""
    agree: dict[str, bool] = {}
    for _ in range(50):
        old[0].sample()
        new[0].sample()
        old[0].sample()
        before, now, after = old[1][-2], new[1][-1], old[1][-1]
        for key in NOT_CLOCKS:
            if before[key] == after[key] and key not in agree:
                agree[key] = now[key] == before[key]
        if len(agree) == len(NOT_CLOCKS):
            break
    same_keys = set(old[1][-1]) == set(new[1][-1])
    return (f"fields: {'same keys' if same_keys else 'KEYS DIFFER'}; "
            + ", ".join(f"{k} {'equal' if v else 'DIFFERENT'}" for k, v in agree.items())
            + "".join(f", {k} never still" for k in NOT_CLOCKS if k not in agree))


def measure(label: str, old_mod: ModuleType, samples: int, rounds: int) -> None:
    old, new = make(old_mod), make(new_module)
    for s in (old[0], new[0]):
        for _ in range(10):  # warm: imports, Process objects, the first CPU times
            s.sample()
    figures: dict[str, list[float]] = {"old": [], "new": []}
    for _ in range(rounds):
        figures["old"].append(cpu_per_sample(old[0], samples))
        figures["new"].append(cpu_per_sample(new[0], samples))
    o, n = statistics.median(figures["old"]), statistics.median(figures["new"])
    print(f"{label}: old {o * 1e6:7.1f} µs CPU a sample   new {n * 1e6:7.1f} µs   ({n / o:.0%})"
          f"   [rounds old {' '.join(f'{x * 1e6:.0f}' for x in figures['old'])};"
          f" new {' '.join(f'{x * 1e6:.0f}' for x in figures['new'])}]")
    print(f"  {compare(old, new)}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=200)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--old", default="42b38ff", help="git revision of the older sampler")
    args = p.parse_args()
    old_mod = old_module(args.old)
    with open("/proc/loadavg") if Path("/proc/loadavg").exists() else open(__file__) as fh:
        print(f"load: {fh.readline().strip()[:40]}")
    measure("no children       ", old_mod, args.samples, args.rounds)

    import torch
    from torch.utils.data import DataLoader

    loader = DataLoader(torch.arange(64.0), batch_size=8, num_workers=2, persistent_workers=True)
    batches = iter(loader)
    next(batches)  # both workers started; they wait for the next indices
    measure("2 DataLoader workers", old_mod, args.samples, args.rounds)
    del batches


if __name__ == "__main__":
    main()
