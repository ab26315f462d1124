"""System calls a steady step on the training thread, bare and under the probe, counted by the kernel.

Why (issue 34, session 61): a system call inside a training loop costs several times what it
costs alone (what it evicts; on a virtual machine, the switch into the kernel), and neither
callgrind nor a bytecode count sees the kernel's side. The fetch clock's two calls at every
batch of a collating loader were found this way: ``perf`` counted 2,010
``clock_gettime(CLOCK_THREAD_CPUTIME_ID)`` per 1,000 steps where the schedule meant ~250.
The count does not depend on the machine's load: it is the steady figure to compare versions by.

Each variant runs in its own process under ``perf record -e raw_syscalls:sys_enter`` (a
kernel tracepoint: the process runs at its own speed, unlike under ``strace``, whose slowed
fetches would all read as long). The MLP loop of ``step_cost.py`` (DataLoader, batch 64)
runs ``--warm`` steps, then ``--steps`` steps between two ``getpriority`` calls (the window's
marks: a call nothing else in the loop makes); the calls in the window are counted per
thread, the training thread's by name. Needs ``perf`` and the tracepoint (root, or
``kernel.perf_event_paranoid`` <= 1 with access to tracefs).

    OMP_NUM_THREADS=1 python benchmarks/step_syscalls.py [--width 32] [--steps 1000]
    OMP_NUM_THREADS=1 python benchmarks/step_syscalls.py --baseline /tmp/old/mpsprofiler   # another version
    OMP_NUM_THREADS=1 python benchmarks/step_syscalls.py --framework hf --fw-python /path/to/venv/bin/python

``--framework hf|lightning``: ``fw_workload.py``'s Trainer or Lightning loop, bare and under
``mpsprof run --headless`` (``PYTHONPATH`` picks the version), each at two lengths (``--steps``
and three times it, past the exact first fetches); the training process's main thread's calls
of the longer run less the shorter's, per step: start-up and set-up cancel out, no marks needed.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
NAMES = {0: "read", 1: "write", 3: "close", 7: "poll", 9: "mmap", 11: "munmap", 12: "brk", 17: "pread64",
         24: "sched_yield", 28: "madvise", 39: "getpid", 202: "futex", 228: "clock_gettime", 230: "clock_nanosleep",
         257: "openat", 262: "newfstatat", 270: "pselect6"}
"""x86-64 system call numbers of the calls a loop makes (others are shown by number)."""
MARK = 140
"""``getpriority``: the window's marks."""
VARIANTS = {"bare": None, "--no-ops": ("terminal", "ops"), "full probe": ("terminal",)}

CHILD = """
import os, sys
sys.path.insert(0, {here!r})
import step_cost as sc, torch
{load_baseline}
torch.set_num_threads(1)
loop = sc.Loop({width}, 64, True)
off = {off!r}
probe = sc.start_probe(sc.ALL - set(off), {use_baseline}) if off is not None else None
loop.block({warm}, 10)
os.getpriority(os.PRIO_PROCESS, 0)
loop.block(0, {steps})
os.getpriority(os.PRIO_PROCESS, 0)
if probe is not None:
    sc.stop_probe(probe)
"""


def _events(cmd: list[str], folder: str) -> list[tuple[int, int, int]]:
    """(pid, tid, call number) of every system call ``cmd``'s process tree made, in order."""
    data = os.path.join(folder, "perf.data")
    subprocess.run(["perf", "record", "-q", "-o", data, "-e", "raw_syscalls:sys_enter", "--", *cmd], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    text = subprocess.run(["perf", "script", "-i", data, "-F", "pid,tid,trace"], check=True, capture_output=True,
                          text=True).stdout
    return [(int(m[1]), int(m[2]), int(m[3])) for m in re.finditer(r"(\d+)/(\d+)\s+NR (-?\d+)", text)]


def count(script: str, folder: str) -> tuple[collections.Counter[str], collections.Counter[str]]:
    """(training thread's calls by name, other threads' calls by name) in the marked window."""
    events = _events([sys.executable, "-c", script], folder)
    marks = [i for i, (_, _, nr) in enumerate(events) if nr == MARK]
    if len(marks) < 2:
        raise RuntimeError("the window's marks were not recorded (is the tracepoint readable?)")
    main = events[marks[0]][1]
    mine: collections.Counter[str] = collections.Counter()
    others: collections.Counter[str] = collections.Counter()
    for _, tid, nr in events[marks[0] + 1:marks[-1]]:
        (mine if tid == main else others)[NAMES.get(nr, str(nr))] += 1
    return mine, others


def _main_thread_calls(cmd: list[str], folder: str) -> collections.Counter[str]:
    """Calls by name of the main thread of the process (of ``cmd``'s tree) that made the most."""
    per: dict[int, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for pid, tid, nr in _events(cmd, folder):
        if pid == tid:
            per[pid][NAMES.get(nr, str(nr))] += 1
    return max(per.values(), key=lambda c: sum(c.values()))


def framework(name: str, python: str, steps: int) -> None:
    """Per step of a framework loop: the longer run's calls less the shorter's."""
    script = os.path.join(HERE, "fw_workload.py")
    print(f"system calls a step of the {name} loop's training thread ({3 * steps} steps less {steps})")
    with tempfile.TemporaryDirectory(prefix="step-syscalls-") as folder:
        for variant in ("bare", "mpsprof"):
            counts = []
            for n in (steps, 3 * steps):
                run_dir = os.path.join(folder, f"run-{variant}-{n}")
                launch = [] if variant == "bare" else ["-m", "mpsprofiler", "run", "--headless", "-o", run_dir]
                counts.append(_main_thread_calls([python, *launch, script, "--framework", name, "--steps", str(n)],
                                                 folder))
            short, long = counts
            per = {k: (long[k] - short[k]) / (2 * steps) for k in set(short) | set(long)}
            shown = ", ".join(f"{k} {v:.2f}" for k, v in sorted(per.items(), key=lambda kv: -abs(kv[1]))
                              if abs(v) >= 0.05)
            print(f"  {variant:8s} {shown}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--width", type=int, default=32)
    p.add_argument("--steps", type=int, help="steps in the window (default 1,000; a framework's shorter run: 400)")
    p.add_argument("--warm", type=int, default=400, help="untimed steps first (past the exact first fetches)")
    p.add_argument("--baseline", help="another version's mpsprofiler package folder: its full probe joins")
    p.add_argument("--framework", choices=["hf", "lightning"], help="a framework loop instead (see above)")
    p.add_argument("--fw-python", default=sys.executable, help="python with transformers/lightning")
    args = p.parse_args()
    if shutil.which("perf") is None:
        sys.exit("step_syscalls: needs perf (linux-tools)")
    if args.framework:
        framework(args.framework, args.fw_python, args.steps or 400)
        return
    args.steps = args.steps or 1000
    variants = dict(VARIANTS)
    if args.baseline:
        variants["baseline full probe"] = ("terminal",)
    print(f"system calls per 1,000 steady steps (MLP width {args.width}, {args.steps} steps after {args.warm})")
    with tempfile.TemporaryDirectory(prefix="step-syscalls-") as folder:
        for name, off in variants.items():
            use_baseline = name.startswith("baseline")
            load = f"sc.load_baseline({os.path.abspath(args.baseline)!r})" if use_baseline else ""
            script = CHILD.format(here=HERE, width=args.width, off=off, warm=args.warm, steps=args.steps,
                                  use_baseline=use_baseline, load_baseline=load)
            mine, others = count(script, folder)
            per = 1000 / args.steps
            shown = ", ".join(f"{k} {v * per:.0f}" for k, v in mine.most_common(8)) or "none"
            print(f"  {name:22s} training thread: {sum(mine.values()) * per:7.0f} ({shown}); "
                  f"other threads: {sum(others.values()) * per:.0f}")


if __name__ == "__main__":
    main()
