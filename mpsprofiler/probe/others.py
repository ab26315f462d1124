"""The programs other than the run that hold the most memory, as ``top`` lists them.

Read by the memory sampler only while the machine is short of memory (issue 27: a
"memory pressure" warning on a run that held 3% of the memory in use, because another
program briefly took the machine's free memory down to 200 MiB): the diagnosis then says
which program it was and how much it held, instead of blaming the run. A scan of every
process costs milliseconds, so it runs at most every ``EVERY`` seconds, and never while
memory is plentiful.
"""

from __future__ import annotations

from typing import Any

BELOW = 0.08
"""Scan when available memory is at or below this share of the total (the share below
which memory-pressure and memory-taken-by-others look at the run at all)."""
EVERY = 5.0
"""Seconds between two scans at most."""
EVERY_INLINE = 30.0
"""Seconds between two scans while the sampler runs on the training thread (the event
channel's inline wakes, probe/channel.py): a scan of ~90 processes took 7.4 ms here, 0.15%
of the training's time every 5 s, 0.025% every 30 s. The first scan still comes at the first
sample that finds memory short."""
TOP = 3


def largest_others(psutil: Any, own: set[int], top: int = TOP) -> list[list[Any]]:
    """``[[name, pid, rss bytes], ...]``, largest resident set first, of processes not in ``own``
    (the training process and its workers). Processes that vanish or deny access are skipped."""
    found: list[tuple[int, int, str]] = []
    for proc in psutil.process_iter(["name", "memory_info"]):
        try:
            if proc.pid in own:
                continue
            info = proc.info.get("memory_info")
            if info is None:
                continue
            found.append((int(info.rss), int(proc.pid), str(proc.info.get("name") or "?")))
        except Exception:
            continue
    found.sort(reverse=True)
    return [[name, pid, rss] for rss, pid, name in found[:top]]
