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
{baseline}
import step_cost as sc, torch
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


def count(script: str, folder: str) -> tuple[collections.Counter[str], collections.Counter[str]]:
    """(training thread's calls by name, other threads' calls by name) in the marked window."""
    data = os.path.join(folder, "perf.data")
    subprocess.run(["perf", "record", "-q", "-o", data, "-e", "raw_syscalls:sys_enter", "--", sys.executable,
                    "-c", script], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    text = subprocess.run(["perf", "script", "-i", data, "-F", "pid,tid,trace"], check=True, capture_output=True,
                          text=True).stdout
    events = [(int(m[2]), int(m[3])) for m in re.finditer(r"(\d+)/(\d+)\s+NR (-?\d+)", text)]
    marks = [i for i, (_, nr) in enumerate(events) if nr == MARK]
    if len(marks) < 2:
        raise RuntimeError("the window's marks were not recorded (is the tracepoint readable?)")
    main = events[marks[0]][0]
    mine: collections.Counter[str] = collections.Counter()
    others: collections.Counter[str] = collections.Counter()
    for tid, nr in events[marks[0] + 1:marks[-1]]:
        (mine if tid == main else others)[NAMES.get(nr, str(nr))] += 1
    return mine, others


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--width", type=int, default=32)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--warm", type=int, default=400, help="untimed steps first (past the exact first fetches)")
    p.add_argument("--baseline", help="another version's mpsprofiler package folder: its full probe joins")
    args = p.parse_args()
    if shutil.which("perf") is None:
        sys.exit("step_syscalls: needs perf (linux-tools)")
    variants = dict(VARIANTS)
    if args.baseline:
        variants["baseline full probe"] = ("terminal",)
    print(f"system calls per 1,000 steady steps (MLP width {args.width}, {args.steps} steps after {args.warm})")
    with tempfile.TemporaryDirectory(prefix="step-syscalls-") as folder:
        for name, off in variants.items():
            use_baseline = name.startswith("baseline")
            baseline = f"sc_base = {os.path.abspath(args.baseline)!r}" if use_baseline else ""
            script = CHILD.format(here=HERE, width=args.width, off=off, warm=args.warm, steps=args.steps,
                                  use_baseline=use_baseline, baseline=baseline)
            if use_baseline:
                script = script.replace("import step_cost as sc, torch",
                                        "import step_cost as sc, torch\nsc.load_baseline(sc_base)")
            mine, others = count(script, folder)
            per = 1000 / args.steps
            shown = ", ".join(f"{k} {v * per:.0f}" for k, v in mine.most_common(8)) or "none"
            print(f"  {name:22s} training thread: {sum(mine.values()) * per:7.0f} ({shown}); "
                  f"other threads: {sum(others.values()) * per:.0f}")


if __name__ == "__main__":
    main()
