"""The launcher's listing of other programs from ``/proc/<pid>/stat`` (launcher/others.py,
issue 34) gives psutil's figures: the same processes, parents, start times, CPU seconds and
names, so ``other-programs-busy`` and the "Other programs used X of N cores" note read the
same numbers as with psutil's process objects, at a fraction of their cost."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from mpsprofiler.launcher import others
from mpsprofiler.launcher.others import OtherPrograms

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="no /proc (Linux only)")


def _sampler() -> OtherPrograms:
    sampler = OtherPrograms()
    sampler._t0, sampler._wall0 = time.monotonic(), 0.0  # every process counts from its start
    return sampler


def _idle(argv: list[str]) -> subprocess.Popen[bytes]:
    """A process that sleeps: its CPU seconds do not move between two listings."""
    proc = subprocess.Popen(argv)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:  # until it has exec'd and sleeps
        try:
            p = psutil.Process(proc.pid)
            if p.status() == psutil.STATUS_SLEEPING and p.cmdline()[:1] == argv[:1]:
                break
        except psutil.Error:
            pass
        time.sleep(0.05)
    return proc


def test_a_proc_listing_row_is_psutils_figures(tmp_path: Path) -> None:
    """A sleeping child, under a name longer than the kernel's 15 characters: its row from
    ``/proc`` holds psutil's parent, start time and CPU seconds exactly, and its name is
    psutil's (the command line's first word completes the truncated one)."""
    long_name = tmp_path / "python_sleeper_long_name"
    long_name.symlink_to(sys.executable)
    children = [_idle([str(long_name), "-c", "import time; time.sleep(60)"]),
                _idle([sys.executable, "-c", "import time; time.sleep(60)"])]
    try:
        sampler = _sampler()
        rows = {row[0]: row for row in sampler._list(psutil)}
        assert sampler._proc  # read from /proc, not psutil
        for child in children:
            pid, ppid, created, cpu, comm, handle = rows[child.pid]
            proc = psutil.Process(child.pid)
            times = proc.cpu_times()
            assert handle is None and ppid == os.getpid() == proc.ppid()
            assert created == proc.create_time()
            assert cpu == float(times.user + times.system)
            assert len(comm) <= 15 and proc.name().startswith(comm)
            proc.info = {"name": proc.name()}  # as process_iter gives it
            assert others._proc_name(pid, comm) == others._name(proc)
        assert others._proc_name(children[0].pid, rows[children[0].pid][4]) == "python_sleeper_long_name -c"
    finally:
        for child in children:
            child.kill()
            child.wait()


def test_both_listings_hold_the_same_processes_and_names() -> None:
    """The same keys (pid, start time) and names from ``/proc`` and from psutil; the training's
    tree (this process and its descendants) and the launcher itself in neither."""
    child = _idle([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        fast, slow = _sampler(), _sampler()
        slow._proc = False  # psutil's listing
        fast._read(fast._list(psutil), os.getpid())
        slow._read(slow._list(psutil), os.getpid())
        assert child.pid not in {pid for pid, _ in fast._last}
        common = set(fast._last) & set(slow._last)
        # a process may start or end between the two listings; nearly all are in both
        assert len(common) >= 0.9 * max(len(fast._last), len(slow._last)) > 0
        # a name is read once a process has used CPU: one that used its first CPU between
        # the two listings (another test's run, a kernel thread) is named in one of them only
        named_fast = {k: fast._last[k][1] for k in common if fast._last[k][1]}
        named_slow = {k: slow._last[k][1] for k in common if slow._last[k][1]}
        both = named_fast.keys() & named_slow.keys()
        assert {k: named_fast[k] for k in both} == {k: named_slow[k] for k in both}
        assert len(named_fast.keys() ^ named_slow.keys()) <= 0.1 * len(common)
        assert all(fast._first[k] == 0.0 for k in common)
        assert any(fast._last[k][1] for k in common)  # some used CPU: named
    finally:
        child.kill()
        child.wait()


def test_a_process_that_used_no_cpu_is_not_named_nor_counted() -> None:
    """Names are read only for processes that used CPU since the run began: one that used
    none adds nothing to a name's figure, and its command line is never read."""
    sampler = OtherPrograms()
    sampler._t0, sampler._wall0 = time.monotonic() - 10.0, 100.0
    rows = [(10, 1, 50.0, 4.0, "old", None), (11, 1, 150.0, 0.0, "new-idle", None),
            (12, 1, 150.0, 2.0, "busy", None), (13, 99, 150.0, 7.0, "worker", None)]
    sampler._read(rows, 99)  # 13 is the training's
    assert sampler._last == {(10, 50.0): (4.0, None), (11, 150.0): (0.0, None), (12, 150.0): (2.0, "busy")}
    sampler._read([(10, 1, 50.0, 6.0, "old", None), *rows[1:]], 99)
    assert sampler._last[(10, 50.0)] == (6.0, "old")
    sampler._send(min_window=0.0)
    top = sampler._latest["top"]  # type: ignore[index]
    assert [t["name"] for t in top] == ["old", "busy"] and [t["cores"] for t in top] == [0.2, 0.2]
