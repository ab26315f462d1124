"""The memory sampler's readings of Linux's ``/proc``, made directly (issue 34).

A sample runs at the channel's wakes, holding the GIL the training needs: psutil took
most of its CPU (0.73 ms per sample inside a 1 ms-step training, ~0.15% of the training's
time), mostly in work the sampler does not need: ``virtual_memory`` parses every line of
``/proc/meminfo`` into a dict and the swap figure read that file a second time;
``Process.oneshot`` builds caches, ``memory_info`` and ``cpu_times`` named tuples; each
``open`` is a buffered Python file (``fstat`` and an ``isatty`` ``ioctl`` besides the
read); and the process tree was looked for at every sample, one ``children`` file per
thread, although a training without DataLoader workers has no child at all.

Here every file is one ``os.open``, one ``os.read`` and one ``os.close``, each file is
read once a sample, this process's CPU times come from ``os.times()`` (no file), and a
process without children is told by one ``waitid`` (:func:`childless`, no file) before any
``children`` file is read: 17 system calls a sample where the psutil readings made 52
(strace, a process without children; 91 where they made 205 with 2 DataLoader workers).
The figures are psutil's, value for value (the same fields of the same files, the same
arithmetic in the same order, so even the floats are equal:
``tests/unit/test_sampler_procfs.py``), and psutil answers wherever a file lacks what
psutil would compute some other way. The callers hold ``fdguard.held()`` around these
reads (see ``MemorySampler.sample``).
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
"""psutil's divisor of the ``/proc/<pid>/stat`` and ``/proc/stat`` times."""
PAGESIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
"""psutil's multiplier of the ``/proc/<pid>/statm`` pages."""
_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
_WALL = 0x40000000
"""Linux's ``__WALL`` (<linux/wait.h>; not in Python's ``os``): ``waitid`` also sees
children that do not signal their parent with SIGCHLD (``clone`` with another exit signal)."""


class ProcessFigures(NamedTuple):
    """What a sample takes of one process: psutil's ``memory_info().rss`` and
    ``cpu_times()`` (seconds; ``children_*``: its reaped children's)."""

    rss: int
    user: float
    system: float
    children_user: float
    children_system: float


def read(path: str, size: int = 4096, whole: bool = True) -> bytes:
    """The file's bytes: one ``read`` of ``size`` (the files read here are shorter), read
    on to the end where the first read came back more than half full (a ``children`` file
    of many processes) unless ``whole`` is False (the first line of ``/proc/stat`` is all
    that is wanted of it). OSError where it cannot be read (a process that ended)."""
    fd = os.open(path, _FLAGS)
    try:
        data = os.read(fd, size)
        if whole and len(data) > size // 2:
            parts = [data]
            while part := os.read(fd, 65536):
                parts.append(part)
            data = b"".join(parts)
    finally:
        os.close(fd)
    return data


def usable(pid: int) -> bool:
    """Whether this reader can take the samples of process ``pid``: Linux with the files
    it reads, the ``children`` ones included (a kernel built with CONFIG_PROC_CHILDREN)."""
    return all(os.path.exists(path) for path in (
        f"/proc/{pid}/stat", f"/proc/{pid}/statm", f"/proc/{pid}/task/{pid}/children", "/proc/meminfo"))


def process(pid: int) -> ProcessFigures:
    """The process's figures from ``/proc/<pid>/statm`` and ``/proc/<pid>/stat``, as
    psutil's ``oneshot`` reads them (OSError or ValueError where the process is gone).

    The ``rss`` field of ``stat`` is no substitute for ``statm``'s (psutil's): on newer
    kernels it is a cheaper estimate of the same counters, some pages off (23 of 86
    processes differed on a Linux 6.18 machine, by 16 to 44 pages). For this process the times come from ``os.times()`` instead
    of ``stat``: one system call where a file costs three; ``times(2)`` and ``stat`` take
    them from the same kernel function (``thread_group_cputime_adjusted``), in the same
    clock ticks, and Python divides them by the same ticks a second."""
    statm = read(f"/proc/{pid}/statm")
    rss = int(statm.split(None, 2)[1]) * PAGESIZE
    if pid == os.getpid():
        own = os.times()
        return ProcessFigures(rss, own.user, own.system, own.children_user, own.children_system)
    stat = read(f"/proc/{pid}/stat")
    # after the command's name, which may hold spaces and parentheses: psutil's split
    fields = stat[stat.rfind(b")") + 2:].split(None, 16)
    return ProcessFigures(rss, float(fields[11]) / CLOCK_TICKS, float(fields[12]) / CLOCK_TICKS,
                          float(fields[13]) / CLOCK_TICKS, float(fields[14]) / CLOCK_TICKS)


class SystemMemory(NamedTuple):
    total: int
    available: int | None
    """None where psutil computes it from other files (see :func:`system_memory`)."""
    swap_used: int | None
    """None where ``/proc/meminfo`` has no swap lines (psutil then asks ``sysinfo``)."""


def system_memory(proc: str = "/proc") -> SystemMemory | None:
    """``psutil.virtual_memory()``'s ``total`` and ``available`` and
    ``psutil.swap_memory()``'s ``used`` from one read of ``/proc/meminfo``, None where the
    file is unreadable. ``available`` is None where psutil would compute it from other
    files: without a ``MemAvailable`` line (kernels before 3.14) or with a zero one (psutil
    issue 1915), its ``calculate_avail_vmem`` reads ``/proc/zoneinfo``. (``proc``: where
    the file is, as ``psutil.PROCFS_PATH``: the tests compare made-up files.)"""
    try:
        data = b"\n" + read(f"{proc}/meminfo", 8192)
        total = _kib(data, b"\nMemTotal:")
        if total is None:
            return None
        avail = _kib(data, b"\nMemAvailable:") or None
        if avail is not None and avail > total:
            # psutil's rule: inside a container the host's figures may leak into the file
            avail = _kib(data, b"\nMemFree:")
        swap_total = _kib(data, b"\nSwapTotal:")
        swap_free = _kib(data, b"\nSwapFree:")
    except (OSError, ValueError, IndexError):
        return None
    swap = None if swap_total is None or swap_free is None else swap_total - swap_free
    return SystemMemory(total, avail, swap)


def _kib(data: bytes, key: bytes) -> int | None:
    """The bytes of a ``/proc/meminfo`` line (its number times 1024, as psutil counts)."""
    at = data.find(key)
    if at < 0:
        return None
    start = at + len(key)
    return int(data[start:data.index(b"\n", start)].split()[0]) * 1024


def cpu_times(kind: Any) -> Any:
    """``psutil.cpu_times()`` of Linux: the first line of ``/proc/stat`` in ``kind``, the
    named tuple psutil returns (its fields are those this kernel reports). OSError or
    ValueError where unreadable."""
    line = read("/proc/stat", 1024, whole=False).split(b"\n", 1)[0].split()
    return kind(*[float(x) / CLOCK_TICKS for x in line[1:len(kind._fields) + 1]])


def childless(pid: int) -> bool:
    """Process ``pid``, this one, has no child process at all: ``waitid`` with ``WNOHANG |
    WNOWAIT`` answers without waiting and without reaping (the script's own ``wait`` still
    gets every child), one system call and no file where the ``children`` files cost one
    open per thread. False where it cannot tell (``pid`` is another process: a forked copy
    of the sampler)."""
    if pid != os.getpid():
        return False
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT | _WALL)
    except ChildProcessError:
        return True
    except (OSError, AttributeError, ValueError):
        return False
    return False


def descendants(pid: int) -> dict[int, list[str]]:
    """The process's descendants, each with the ids of its threads, from
    ``/proc/<pid>/task/<tid>/children`` (see :func:`usable`).

    psutil's ``children(recursive=True)`` reads the parent of every process on the machine
    to find them: 1.8 ms with 65 processes here, and every sample pays it, holding the GIL
    the training needs for part of it; these files name a process's children directly
    (0.15 ms). A child started between two reads is seen at the next sample. A child whose
    threads cannot be listed (it just ended) has none."""
    found: dict[int, list[str]] = {}
    try:
        todo = [(pid, os.listdir(f"/proc/{pid}/task"))]
    except OSError:
        return found
    while todo:
        parent, threads = todo.pop()
        for tid in threads:
            try:
                kids = [int(k) for k in read(f"/proc/{parent}/task/{tid}/children").split()]
            except (OSError, ValueError):  # a thread or process that just ended
                continue
            for kid in kids:
                if kid not in found:
                    try:
                        found[kid] = os.listdir(f"/proc/{kid}/task")
                    except OSError:
                        found[kid] = []
                        continue
                    todo.append((kid, found[kid]))
    return found


def runq_thread(pid: int, tid: int) -> float | None:
    """Seconds one thread (the main one: the training's) waited for a CPU (Linux), or None."""
    try:
        return round(int(read(f"/proc/{pid}/task/{tid}/schedstat", 128).split()[1]) / 1e9, 4)
    except (OSError, IndexError, ValueError):
        return None


def runq(pid: int, tids: list[str] | None = None) -> float | None:
    """Seconds the process's threads together waited for a CPU (``tids``: its threads,
    where the caller listed them already).

    All threads, not only the main one: a DataLoader worker's result-queue feeder thread
    pickles each batch, and its resource-sharer thread hands the tensors' file descriptors
    to the training process while that waits, so their queuing delays the batch too.
    """
    if not tids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            tids = []
    total, seen = 0.0, False
    for tid in tids or [str(pid)]:
        path = f"/proc/{pid}/task/{tid}/schedstat" if tids else f"/proc/{pid}/schedstat"
        try:
            total += int(read(path, 128).split()[1]) / 1e9
            seen = True
        except (OSError, IndexError, ValueError):
            continue
    return total if seen else None
