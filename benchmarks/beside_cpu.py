"""What runs beside the training thread: CPU and wakes a second of mpsprof's other threads.

On a machine where the training has one core (``overhead.py --concurrent`` gives each
variant one; a busy laptop is the same) everything mpsprof runs beside the training thread
is the training's time, and each wake of a thread evicts some of the training's caches.
This runs the real ``mpsprof run --headless`` around ``workload.py``'s width-32 MLP (the
"0.2 ms" case: thousands of steps a second, the most events a second) and reads, over a
window in the middle of the loop, every thread's CPU time (the first figure of
``/proc/<pid>/task/<tid>/schedstat``, in ns: ``stat``'s ticks of 10 ms are too coarse for
a few ms a second) and its voluntary context switches (``.../status``: a thread that sleeps and wakes switches
once a wake; preemptions, which a busy machine adds, are the other count)
for the launcher (the parent) and the training process (the child)::

    OMP_NUM_THREADS=1 python benchmarks/beside_cpu.py [--baseline DIR] [--window 6] [--repeats 3]

``--baseline DIR`` (a folder holding another version's ``mpsprofiler`` package) runs that
version in the same rounds, at the same time, each pinned to a core of its own
(``taskset``), so both see the same machine. Linux only (``/proc``). Threads are named by
the order they started (Python 3.11 gives them no kernel name; :data:`ROLES`): the child's
main thread is the training's; in the parent, the main thread waits for the child. The
``beside`` rows add up every thread but the training's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROLES = {
    "parent": ["main (waits)", "others listing", "event reader"],
    "child": ["training", "channel", "sampler"],
}
"""Threads in the order they start under ``mpsprof run --headless`` (the sampler's thread:
versions before session 55; it runs on the channel's since; the channel's: none since session
57 where the training process started no thread, its wakes run on the training thread)."""


def _threads(pid: int) -> dict[int, tuple[float, int]]:
    """tid -> (CPU seconds, context switches) of every thread of ``pid`` now."""
    out: dict[int, tuple[float, int]] = {}
    try:
        tids = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as fh:
                on_cpu_ns = int(fh.read().split()[0])
            switches = 0
            with open(f"/proc/{pid}/task/{tid}/status", "rb") as fh:
                for line in fh:
                    if line.startswith(b"voluntary_ctxt_switches:"):
                        switches = int(line.split()[1])
        except (OSError, IndexError, ValueError):
            continue
        out[tid] = (on_cpu_ns / 1e9, switches)
    return out


def _child_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as fh:
            kids = [int(k) for k in fh.read().split()]
    except (OSError, ValueError):
        return None
    return kids[0] if kids else None


def _per_second(before: dict[int, tuple[float, int]], after: dict[int, tuple[float, int]],
                seconds: float, main: int, roles: list[str]) -> list[tuple[str, float, float]]:  # fmt: skip
    """(role, CPU ms a second, wakes a second) per thread alive at both readings."""
    rows = []
    tids = [main, *(t for t in sorted(after) if t in before and t != main)]
    for n, tid in enumerate(tids):
        label = roles[n] if n < len(roles) else f"thread {n}"
        if tid not in before or tid not in after:
            continue
        cpu = (after[tid][0] - before[tid][0]) / seconds * 1e3
        wakes = (after[tid][1] - before[tid][1]) / seconds
        rows.append((label, cpu, wakes))
    return rows


def launch(pythonpath: str, core: str | None, steps: int, run_dir: Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "mpsprofiler", "run", "--headless", "-o", str(run_dir),
           str(HERE / "workload.py"), "--model", "mlp", "--width", "32", "--steps", str(steps)]
    if core is not None:
        cmd = ["taskset", "-c", core, *cmd]
    env = {**os.environ, "PYTHONPATH": pythonpath, "OMP_NUM_THREADS": "1"}
    # not from the repository's root: ``-m`` puts the working directory before PYTHONPATH,
    # and the baseline's launcher would be this checkout's
    return subprocess.Popen(cmd, env=env, cwd=run_dir.parent, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def measure(procs: dict[str, subprocess.Popen[bytes]], settle: float, window: float) -> dict[str, dict[str, list]]:
    """Read every variant's threads ``settle`` seconds after the start and ``window`` later."""
    time.sleep(settle)
    kids = {name: _child_of(p.pid) for name, p in procs.items()}
    t0 = time.monotonic()
    before = {name: (_threads(p.pid), _threads(kids[name]) if kids[name] else {}) for name, p in procs.items()}
    time.sleep(window)
    seconds = time.monotonic() - t0
    after = {name: (_threads(p.pid), _threads(kids[name]) if kids[name] else {}) for name, p in procs.items()}
    out = {}
    for name, p in procs.items():
        kid = kids[name]
        out[name] = {
            "parent": _per_second(before[name][0], after[name][0], seconds, p.pid, ROLES["parent"]),
            "child": _per_second(before[name][1], after[name][1], seconds, kid, ROLES["child"]) if kid else [],
        }
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--baseline", help="a folder holding another version's mpsprofiler package")
    p.add_argument("--window", type=float, default=6.0, help="seconds measured per round")
    p.add_argument("--settle", type=float, default=5.0, help="seconds after the start before the window")
    p.add_argument("--steps", type=int, default=60000, help="steps per run (long enough to outlast the window)")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    variants = {"this": str(HERE.parent)}
    if args.baseline:
        variants = {"baseline": os.path.abspath(args.baseline), **variants}
    cores = [str(i % (os.cpu_count() or 1)) for i in range(len(variants))] if len(variants) > 1 else [None]
    table: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    load = f"{os.getloadavg()[0]:.1f}"
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(args.repeats):
            rot = cores[n % len(cores):] + cores[:n % len(cores)]
            procs = {name: launch(path, rot[i], args.steps, Path(tmp) / f"{name}{n}")
                     for i, (name, path) in enumerate(variants.items())}
            try:
                got = measure(procs, args.settle, args.window)
            finally:
                for proc in procs.values():
                    proc.terminate()
                for proc in procs.values():
                    proc.wait()
            for name, sides in got.items():
                beside = [0.0, 0.0]
                for side, rows in sides.items():
                    for label, cpu, wakes in rows:
                        table.setdefault((name, side, label), []).append((cpu, wakes))
                        if label != "training":
                            beside[0] += cpu
                            beside[1] += wakes
                table.setdefault((name, "all", "beside"), []).append((beside[0], beside[1]))
    print(f"load average before the rounds {load}, after {os.getloadavg()[0]:.1f}")
    print(f"{'variant':9} {'process':7} {'thread':15} {'CPU ms/s':>20} {'wakes/s':>20}")
    for (name, side, label), vals in sorted(table.items()):
        cpus, wakes = [v[0] for v in vals], [v[1] for v in vals]
        print(f"{name:9} {side:7} {label:15} {statistics.median(cpus):8.2f} ({min(cpus):5.1f}-{max(cpus):5.1f})"
              f" {statistics.median(wakes):8.1f} ({min(wakes):5.0f}-{max(wakes):5.0f})")


if __name__ == "__main__":
    main()
