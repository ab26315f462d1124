"""The memory sampler's direct ``/proc`` reader (mpsprofiler/probe/procfs.py, issue 34) reads
what psutil reads, value for value, and the psutil reader (macOS, or a kernel without the
``children`` files) still answers where it is turned off.

Two readings of a changing figure cannot be taken at one instant, so each comparison is
made between two of psutil's: where psutil reads the same value before and after ours, ours
must be that value; a counter (CPU seconds) must lie between them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import psutil
import pytest

from mpsprofiler.probe import procfs
from mpsprofiler.probe.sampler import MemorySampler

pytestmark = pytest.mark.skipif(not procfs.usable(os.getpid()), reason="Linux /proc with the children files")

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]
PARENT = [sys.executable, "-c", "import subprocess, sys, time; "
          "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"]
NOT_CLOCKS = ("rss", "rss_children", "workers", "sys_total", "sys_available", "swap_used")
COUNTERS = ("cpu_main_s", "cpu_workers_s", "cpu_workers_startup_s", "runq_main_s", "runq_workers_s")


def _same_as_psutil(ours: Callable[[], Any], theirs: Callable[[], Any], tries: int = 200) -> tuple[Any, Any]:
    """``(ours, theirs)`` from a round where psutil read the same before and after ours."""
    for _ in range(tries):
        before, got, after = theirs(), ours(), theirs()
        if before == after:
            return got, before
    pytest.fail(f"psutil never read the same twice in a row: {before} / {after}")


def test_system_memory_is_psutils_total_available_and_swap_in_use() -> None:
    got, expected = _same_as_psutil(
        procfs.system_memory,
        lambda: (psutil.virtual_memory().total, psutil.virtual_memory().available, psutil.swap_memory().used))
    assert got is not None
    assert (got.total, got.available, got.swap_used) == expected


def _meminfo(changes: dict[str, int | None]) -> bytes:
    """This machine's ``/proc/meminfo`` with some lines changed (kB) or left out (None)."""
    lines = []
    for line in open("/proc/meminfo", "rb").read().decode().splitlines():
        key = line.split(":")[0]
        if key in changes:
            if changes[key] is None:
                continue
            line = f"{key}:{changes[key]:>16} kB"
        lines.append(line)
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("changes", [
    {"SwapTotal": 2097148, "SwapFree": 1048500},
    {"MemTotal": 1000000, "MemAvailable": 2000000, "MemFree": 300000},  # a container's figures
], ids=["swap in use", "available above total"])
def test_a_made_up_meminfo_reads_as_psutil_reads_it(changes: dict[str, int | None], tmp_path: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "meminfo").write_bytes(_meminfo(changes))
    (tmp_path / "vmstat").write_bytes(open("/proc/vmstat", "rb").read())
    monkeypatch.setattr(psutil, "PROCFS_PATH", str(tmp_path))
    got = procfs.system_memory(str(tmp_path))
    assert got == (psutil.virtual_memory().total, psutil.virtual_memory().available, psutil.swap_memory().used)


@pytest.mark.parametrize("changes", [{"MemAvailable": None}, {"MemAvailable": 0}, {"SwapTotal": None}],
                         ids=["no MemAvailable", "MemAvailable 0", "no swap lines"])
def test_where_psutil_reads_other_files_the_figure_is_left_to_it(changes: dict[str, int | None],
                                                                 tmp_path: Any) -> None:
    (tmp_path / "meminfo").write_bytes(_meminfo(changes))
    got = procfs.system_memory(str(tmp_path))
    assert got is not None
    assert (got.available is None) == ("MemAvailable" in changes) and (got.swap_used is None) == ("SwapTotal" in changes)


def test_a_childs_figures_are_psutils_float_for_float() -> None:
    child = subprocess.Popen(SLEEPER)
    try:
        proc = psutil.Process(child.pid)

        def theirs() -> tuple[Any, ...]:
            with proc.oneshot():
                return (proc.memory_info().rss, *proc.cpu_times()[:4])

        got, expected = _same_as_psutil(lambda: tuple(procfs.process(child.pid)), theirs)
        assert got == expected
    finally:
        child.kill()
        child.wait()


def test_this_processs_figures_are_psutils() -> None:
    """Its CPU times come from ``os.times()``, the same kernel figures as ``stat``'s."""
    proc = psutil.Process()

    def theirs() -> tuple[Any, ...]:
        with proc.oneshot():
            return (proc.memory_info().rss, *proc.cpu_times()[:4])

    got, expected = _same_as_psutil(lambda: tuple(procfs.process(os.getpid())), theirs)
    assert got == expected
    # a counter that moves: between psutil's readings before and after
    busy_until = time.process_time() + 0.05
    while time.process_time() < busy_until:
        pass
    before, ours, after = proc.cpu_times(), procfs.process(os.getpid()), proc.cpu_times()
    assert before.user <= ours.user <= after.user and before.system <= ours.system <= after.system


def test_the_machines_cpu_times_are_psutils() -> None:
    kind = type(psutil.cpu_times())
    got, expected = _same_as_psutil(lambda: procfs.cpu_times(kind), psutil.cpu_times)
    assert type(got) is kind and got == expected


def test_childless_without_children_and_a_zombie_keeps_its_exit_status_for_the_script() -> None:
    """``waitid(..., WNOWAIT)`` reaps nothing: the script's own wait still gets the status."""
    script = ("import os, subprocess, sys\n"
              "from mpsprofiler.probe import procfs\n"
              "print(procfs.childless(os.getpid()))\n"
              "child = subprocess.Popen([sys.executable, '-c', 'raise SystemExit(3)'])\n"
              "print(procfs.childless(os.getpid()))\n"
              "os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # a zombie now\n"
              "print(procfs.childless(os.getpid()), procfs.childless(1))\n"
              "print(child.wait(), procfs.childless(os.getpid()))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.stdout.split("\n")[:4] == ["True", "False", "False False", "3 True"], done.stderr


def _samplers(portable_memory: bool) -> tuple[tuple[MemorySampler, list[dict[str, Any]]], ...]:
    """A sampler with the ``/proc`` reader and one with psutil's (the tree and process
    figures; also system memory and CPU times where ``portable_memory``)."""
    pair = []
    for linux in (True, False):
        sent: list[dict[str, Any]] = []
        sampler = MemorySampler(lambda kind, sent=sent, **fields: sent.append(fields), lambda: None,  # type: ignore[arg-type,return-value,misc]
                                time.monotonic, lambda exc: None)
        assert sampler._procfs
        if not linux:
            sampler._procfs = False
            sampler._meminfo = not portable_memory
        pair.append((sampler, sent))
    return tuple(pair)


def _compare(portable_memory: bool) -> dict[str, Any]:
    """The two samplers' fields, sampled psutil's, ours, psutil's, until psutil's readings of
    every field that is not a clock agree; the last sample of ours. (Shares of a time
    between two samples, ``cpu_pct``, ``sys_busy`` and ``sys_steal``, are None where no
    clock tick came between them: they are compared in test_the_machines_cpu_times_are_psutils.)"""
    (linux, ours), (other, theirs) = _samplers(portable_memory)
    settled: set[str] = set()
    for _ in range(100):
        other.sample()
        linux.sample()
        other.sample()
        before, got, after = theirs[-2], ours[-1], theirs[-1]
        assert set(got) == set(before)
        for key in NOT_CLOCKS:
            if before[key] == after[key]:
                assert got[key] == before[key], (key, before, got)
                settled.add(key)
        for key in COUNTERS:
            assert (got[key] is None) == (before[key] is None), key
            if got[key] is not None:
                assert before[key] <= got[key] <= after[key], (key, before, got, after)
        if settled == set(NOT_CLOCKS) and len(ours) > 2:
            return got
    pytest.fail(f"psutil's readings never settled: {set(NOT_CLOCKS) - settled}")


@pytest.mark.parametrize("portable_memory", [False, True], ids=["psutil tree", "psutil everything"])
def test_the_samplers_fields_are_the_psutil_readers_for_this_process(portable_memory: bool) -> None:
    got = _compare(portable_memory)
    assert got["rss"] > 0 and got["cpu_main_s"] > 0


def test_the_samplers_fields_are_the_psutil_readers_with_children_and_a_grandchild() -> None:
    started = [subprocess.Popen(SLEEPER), subprocess.Popen(PARENT)]
    parent = psutil.Process(started[1].pid)
    try:
        deadline = time.monotonic() + 30
        while not parent.children() and time.monotonic() < deadline:
            time.sleep(0.05)  # the grandchild is started by the child's own python
        got = _compare(portable_memory=False)
        assert got["workers"] >= 3 and got["rss_children"] > 0 and got["runq_workers_s"] is not None
    finally:
        for p in parent.children(recursive=True):
            p.kill()
        for p in started:
            p.kill()
            p.wait()
