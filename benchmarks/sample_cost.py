"""CPU time of one memory sample (``MemorySampler.sample``), an older sampler beside this one.

The sampler runs at the channel's wakes (every 0.5 s), holding the GIL the training needs
for most of its work, so its CPU time is taken from the training (issue 34). Both samplers
run in this one process, in alternating rounds, so both see the same machine and the same
process tree; the figure is the sampling thread's CPU time (``time.thread_time``) over
``--samples`` samples, the median of ``--rounds``: load-independent, unlike wall time.
Two trees: this process alone (the common case: no DataLoader workers), then with a
DataLoader's 2 workers alive (persistent, idle between batches).

``--training SECONDS`` instead takes the samples beside a training: ``workload.py``'s MLP
(``--width``, 256: ~1 ms steps here) trains on the main thread while a second thread takes
a sample every 0.1 s, the old sampler's and the new one's in turn, each timed alone (its
thread's CPU time): what a sample costs where the training keeps the caches and the GIL.
Beside it, the sampling thread's voluntary context switches a sample (``status`` of
``/proc/thread-self``): each is a wait, mostly for the GIL that a system call gave up and
the training took meanwhile, so each is a hand-over of the GIL the training pays for too
(the count includes the one or two of reading that file after the sample, alike for both).

The older sampler is ``mpsprofiler/probe/sampler.py`` at ``--old`` (a git revision of this
repository: 42b38ff, before the direct ``/proc`` reader), loaded into this package so that
both use the same helpers. Each tree's last line compares the two samplers' fields: those
that are not clocks must be equal (read old, new, old: where both old readings agree).

    OMP_NUM_THREADS=1 python benchmarks/sample_cost.py [--samples 200] [--rounds 5] [--old 42b38ff]
    OMP_NUM_THREADS=1 python benchmarks/sample_cost.py --training 10 [--width 256]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import threading
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


def beside_training(old_mod: ModuleType, seconds: float, width: int) -> None:
    """Samples every 0.1 s on a second thread, in turn old and new, while the MLP trains."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import torch
    import workload

    step = workload.training_step("mlp", width, torch.device("cpu"))
    samplers = {"old": make(old_mod)[0], "new": make(new_module)[0]}
    costs: dict[str, list[float]] = {"old": [], "new": []}
    done = threading.Event()

    switches: dict[str, list[int]] = {"old": [], "new": []}

    def sample_now_and_then() -> None:
        turn = 0
        while not done.wait(0.1):
            name = ("old", "new")[turn % 2]
            before = _voluntary_switches()
            t0 = time.thread_time()
            samplers[name].sample()
            costs[name].append(time.thread_time() - t0)
            switches[name].append(_voluntary_switches() - before)
            turn += 1

    for _ in range(50):  # warm-up steps before the first sample
        step()
    thread = threading.Thread(target=sample_now_and_then)
    thread.start()
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        step()
        steps += 1
    done.set()
    thread.join()
    wall = time.perf_counter() - t0
    o, n = statistics.median(costs["old"][1:]), statistics.median(costs["new"][1:])
    print(f"beside the MLP's training ({wall / steps * 1e3:.2f} ms a step, {steps} steps): "
          f"old {o * 1e6:.0f} µs CPU a sample, new {n * 1e6:.0f} µs ({n / o:.0%}); "
          f"medians of {len(costs['old']) - 1} and {len(costs['new']) - 1} samples")
    print(f"  voluntary context switches a sample (median): old {statistics.median(switches['old'][1:]):.0f}, "
          f"new {statistics.median(switches['new'][1:]):.0f}")


def _voluntary_switches() -> int:
    with open("/proc/thread-self/status", "rb") as fh:
        for line in fh:
            if line.startswith(b"voluntary_ctxt_switches:"):
                return int(line.split()[1])
    return 0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=200)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--old", default="42b38ff", help="git revision of the older sampler")
    p.add_argument("--training", type=float, default=0.0, help="seconds of samples beside a training")
    p.add_argument("--width", type=int, default=256, help="the MLP's width with --training")
    args = p.parse_args()
    old_mod = old_module(args.old)
    with open("/proc/loadavg") if Path("/proc/loadavg").exists() else open(__file__) as fh:
        print(f"load: {fh.readline().strip()[:40]}")
    if args.training:
        beside_training(old_mod, args.training, args.width)
        return
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
