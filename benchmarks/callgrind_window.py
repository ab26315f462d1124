"""The timed loop of a benchmark workload as callgrind's instrumented window (``loop_instructions.py``).

``workload.py`` and ``fw_workload.py`` call :func:`start` where their timed loop begins and
:func:`stop` where it ends. Without ``BENCH_CALLGRIND`` in the environment both return at once
(every other benchmark). With it the process runs under ``valgrind --tool=callgrind
--instr-atstart=no`` (``loop_instructions.py`` starts it so, or has ``mpsprof run`` start it
so): :func:`start` switches instrumentation on for this process (``callgrind_control -i on
PID``) and :func:`stop` switches it off, so the counts are the loop's alone, not the
interpreter's start, the imports or the framework's set-up.

At :func:`start`, in a process where mpsprof's probe is loaded, the probe's time thresholds
are set as an untraced run on a quiet machine meets them (``counted_schedule.out_of_reach``,
which leaves a bare run's modules alone): under callgrind a step lasts ~50 times longer, and
every DataLoader fetch would read as long and have its clocks read.
"""

from __future__ import annotations

import os
import subprocess

from counted_schedule import out_of_reach

ENV = "BENCH_CALLGRIND"


def _switch(on: bool) -> None:
    subprocess.run(["callgrind_control", "-i", "on" if on else "off", str(os.getpid())], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip


def start() -> None:
    if not os.environ.get(ENV):
        return
    out_of_reach(packages=("mpsprofiler",))
    _switch(True)


def stop() -> None:
    if os.environ.get(ENV):
        _switch(False)
