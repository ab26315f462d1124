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

from helpers import child_env
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


def _alive(key: tuple[int, float]) -> bool:
    """Whether the process of a listing's key (pid, start time) still runs (not a new one
    under a reused pid)."""
    try:
        return psutil.Process(key[0]).create_time() == key[1]
    except psutil.Error:
        return False


def test_both_listings_hold_the_same_processes_and_names() -> None:
    """The same keys (pid, start time) and names from ``/proc`` and from psutil; the training's
    tree (this process and its descendants) and the launcher itself in neither.

    On a busy machine processes start, end and exec between two listings, so psutil's is
    taken between two ``/proc`` ones and each is held to what no such change can explain:
    a process in both ``/proc`` listings (alive all along) is in psutil's, with the same name
    where it kept one name all along; one in psutil's that the second ``/proc`` listing
    lacks has ended by then. Used CPU (named) in the first ``/proc`` listing means named in
    psutil's; unnamed in the second means unnamed in psutil's (CPU seconds only grow)."""
    child = _idle([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        before, slow, after = _sampler(), _sampler(), _sampler()
        slow._proc = False  # psutil's listing
        before._read(before._list(psutil), os.getpid())
        slow._read(slow._list(psutil), os.getpid())
        after._read(after._list(psutil), os.getpid())
        assert not isinstance(before._proc, bool) and not isinstance(after._proc, bool)  # read from /proc
        for sampler in (before, slow, after):
            assert child.pid not in {pid for pid, _ in sampler._last}
            assert os.getpid() not in {pid for pid, _ in sampler._last}
        names = {k: v[1] for k, v in slow._last.items()}
        throughout = before._last.keys() & after._last.keys()
        assert throughout and throughout <= names.keys()
        assert not [k for k in names.keys() - after._last.keys() if _alive(k)]  # /proc missed none
        stable = [k for k in throughout if before._last[k][1] == after._last[k][1]]
        assert len(stable) >= 0.5 * len(throughout)
        assert {k: names[k] for k in stable} == {k: before._last[k][1] for k in stable}
        assert all(names[k] for k in throughout if before._last[k][1])
        assert not any(names[k] for k in throughout if not after._last[k][1])
        assert all(before._first[k] == 0.0 for k in throughout)
        assert any(before._last[k][1] for k in stable)  # some used CPU: named
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


def test_the_launcher_lists_without_psutil_where_proc_is_read() -> None:
    """On Linux the launcher's sampler reads ``/proc`` alone, so ``mpsprof run`` does not pay
    for importing psutil (its own imports: ~30 ms of the parent's start-up)."""
    code = ("import os, sys, time; from mpsprofiler.launcher.others import OtherPrograms\n"
            "s = OtherPrograms(interval=0.05); s.start(os.getpid()); time.sleep(0.3); s.stop()\n"
            "print(len(s._last) > 0, 'psutil' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=child_env(), check=True)
    assert out.stdout.split() == ["True", "False"]


class _Listed:
    """A process as psutil's ``process_iter`` lists it: its name and command line."""

    def __init__(self, name: str, argv: list[str]) -> None:
        self.info = {"name": name}
        self._argv = argv

    def cmdline(self) -> list[str]:
        return self._argv


def test_a_process_that_execs_another_program_is_named_again() -> None:
    """``sh -c 'exec python heavy.py'`` keeps its pid and start time: once the listed name
    changes, the CPU it uses is the new program's, not the shell's; a process that keeps its
    name has its command line read once."""
    sampler = OtherPrograms()
    sampler._t0, sampler._wall0 = time.monotonic() - 10.0, 0.0
    shell = _Listed("sh", ["sh", "-c", "exec python heavy.py"])
    steady = _Listed("sleeper", ["sleeper"])
    sampler._read([(30, 1, 50.0, 0.5, "sh", shell), (31, 1, 50.0, 1.0, "sleeper", steady)], 99)
    assert sampler._last[(30, 50.0)] == (0.5, "sh -c")
    heavy = _Listed("python", ["python", "heavy.py"])
    steady._argv = ["renamed"]  # read again, it would say so: it is not
    sampler._read([(30, 1, 50.0, 7.0, "python", heavy), (31, 1, 50.0, 2.0, "sleeper", steady)], 99)
    assert sampler._last == {(30, 50.0): (7.0, "python heavy.py"), (31, 50.0): (2.0, "sleeper")}
