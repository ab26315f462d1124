"""The sampler's CPU totals of child processes that start and end between two samples.

DataLoader workers that are not persistent start again at every epoch; with a few batches
each they may live less than the sampler's 0.5 s between samples. Their CPU time, and their
start-up (probe/worker_startup.py), count once the training process has waited for them
(``getrusage(RUSAGE_CHILDREN)``), not only where a sample saw them alive.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import pytest

from mpsprofiler.probe.sampler import MemorySampler
from mpsprofiler.probe.worker_startup import StartupTable

pytestmark = pytest.mark.skipif(sys.platform == "win32" or not hasattr(os, "fork"), reason="POSIX fork")


def _sampler(table: StartupTable) -> tuple[MemorySampler, list[dict[str, Any]]]:
    sent: list[dict[str, Any]] = []
    sampler = MemorySampler(lambda kind, **fields: sent.append(fields), lambda: None,  # type: ignore[arg-type,return-value]
                            time.monotonic, lambda exc: None, startups=table.take)
    return sampler, sent


def _child(table: StartupTable, cpu_s: float, parent: int | None = None) -> None:
    """Fork a child that burns ``cpu_s`` of CPU, writes its start-up (with ``parent`` as its
    parent pid when given) and exits; wait for it, as torch's DataLoader joins its workers."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            until = time.process_time() + cpu_s
            while time.process_time() < until:
                pass
            table.record(os.getpid(), os.getppid() if parent is None else parent, time.process_time())
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def test_a_child_that_started_and_ended_between_two_samples_counts_its_cpu_and_its_start_up() -> None:
    table = StartupTable()
    sampler, sent = _sampler(table)
    sampler.sample()
    _child(table, 0.2)
    sampler.sample()
    last = sent[-1]
    # all of the child's 0.2 s (it was never seen alive), its start-up within it
    assert 0.18 <= last["cpu_workers_s"], last
    assert 0.18 <= last["cpu_workers_startup_s"] <= last["cpu_workers_s"] + 0.01, last
    sampler.sample()  # the totals never go down, and a start-up counts once
    assert sent[-1]["cpu_workers_s"] >= last["cpu_workers_s"]
    assert sent[-1]["cpu_workers_startup_s"] == last["cpu_workers_startup_s"]


def test_a_start_up_of_a_process_never_seen_and_not_this_ones_child_is_left_out() -> None:
    """Its CPU time is in no total here (another process waited for it): its start-up would
    be more than the workers' CPU time it is taken from."""
    table = StartupTable()
    sampler, sent = _sampler(table)
    sampler.sample()
    _child(table, 0.05, parent=1)
    sampler.sample()
    assert sent[-1]["cpu_workers_startup_s"] == 0.0, sent[-1]
