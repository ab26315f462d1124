"""A start line for runs that ``overhead.py --concurrent`` starts at the same time.

Processes of one round start together but reach their training loops at different times:
mpsprof's launcher and probe add ~1 s of start-up, so without a common start the bare run's
loop ran beside the other's imports and its own last second alone, and the round's ratio
measured that (the 5 ms MLP "13% faster under mpsprof" on a 2-core machine). Each process
calls :func:`wait` before its first training step: it leaves a file in the round's folder
(``BENCH_BARRIER_DIR``) and waits until all ``BENCH_BARRIER_PARTIES`` have, so the warm-up
steps and the timed loop of all of them begin within a millisecond or two. Without those
variables (a run alone) it returns at once.
"""

from __future__ import annotations

import os
import time

TIMEOUT_S = 300.0


def wait() -> None:
    folder = os.environ.get("BENCH_BARRIER_DIR")
    parties = int(os.environ.get("BENCH_BARRIER_PARTIES") or 0)
    if not folder or parties < 2:
        return
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"{os.getpid()}.ready"), "w"):
        pass
    deadline = time.monotonic() + TIMEOUT_S
    while sum(name.endswith(".ready") for name in os.listdir(folder)) < parties:
        if time.monotonic() > deadline:
            raise RuntimeError(f"barrier: fewer than {parties} runs reached {folder} in {TIMEOUT_S:.0f} s")
        time.sleep(0.0005)
