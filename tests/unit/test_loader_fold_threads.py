"""The per-loader sums are folded by another thread (the probe's channel thread) while the
training thread appends batches (probe/loader_sites.py, issue 34): folds taken at any moment
give the same sums and the same updates as one fold at the end, and a forked child starts
with an empty log and a lock of its own."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest

from mpsprofiler.probe import loader_sites
from mpsprofiler.probe.loader_sites import LoaderSites, Site


class _It:
    def __init__(self) -> None:
        self._num_yielded = 0

    def _next_index(self) -> int:  # torch's, which a timed draw calls
        return 0


def _feed(sites: LoaderSites, batches: int, folder: threading.Event | None = None) -> None:
    loader = type("Loader", (), {})()
    sites._sites[loader] = site = Site(1, "train.py", 3)
    sites._every.append(site)  # (what on_created does: flush sends its last sums)
    it = _It()
    sites.on_iter(it, loader, {"created": 1})
    for k in range(batches):
        it._num_yielded += 1
        sites.on_fetch(it, 1e-4 * (1 + k % 7), (0, 1), 0.001 * k, k // 3)
        timer = it.__dict__.get("_next_index")
        if timer is not None:
            timer()
    if folder is not None:
        folder.set()
    sites.flush()


def test_folds_from_another_thread_give_the_sums_of_one_fold(monkeypatch: pytest.MonkeyPatch) -> None:
    ticks = [0.0]

    def perf_counter() -> float:  # the index draws' clock: the same draws in both runs
        ticks[0] += 1e-6
        return ticks[0]

    monkeypatch.setattr(loader_sites.time, "perf_counter", perf_counter)
    alone: list[dict[str, Any]] = []
    _feed(LoaderSites(alone.append, lambda: 0), 40_000)
    ticks[0] = 0.0
    beside: list[dict[str, Any]] = []
    sites = LoaderSites(beside.append, lambda: 0)
    done = threading.Event()
    folds = [0]

    def fold() -> None:
        while not done.is_set():
            sites.fold()
            folds[0] += 1

    thread = threading.Thread(target=fold)
    thread.start()
    _feed(sites, 40_000, done)
    thread.join()
    assert folds[0] > 10  # the thread did fold while the batches came
    assert beside == alone
    assert alone[-1]["fetches"] == 39_999 and alone[-1]["first_fetches"] == 1, alone[-1]


def test_a_forked_child_starts_with_no_log() -> None:
    sites = LoaderSites(lambda d: None, lambda: 0)
    loader = type("Loader", (), {})()
    sites._sites[loader] = Site(1, "train.py", 3)
    sites.on_iter(_It(), loader, {"created": 1})
    sites._lock.acquire()  # held by "another thread" at fork()
    try:
        pid = os.fork()
        if pid == 0:  # the child: what Probe._after_fork calls
            sites.after_fork()
            ok = not sites._log and sites._lock.acquire(timeout=5)
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
    finally:
        sites._lock.release()
    assert os.waitstatus_to_exitcode(status) == 0
    assert sites._log  # the parent's record is still the parent's to fold
