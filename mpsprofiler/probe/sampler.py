"""Periodic memory and CPU sampling, at the event channel's wakes.

The sampler has no thread of its own: it runs at the channel's wakes when a sample is due
(:meth:`MemorySampler.tick`, ``Channel.beside``), and what it emits goes out in the flush
of the same wake. A thread of its own woke twice a second beside the channel's four times,
each wake taking the GIL from the training thread. Where the channel has no thread either
(a single-threaded process on Linux, probe/channel.py) the wakes run on the training
thread: a sample took 0.3-0.45 ms there (every 0.5 s: ~0.1% of the training's time), and
the scan of other programs is rarer (``others.EVERY_INLINE``).

Process figures include the DataLoader worker children (their RSS is real memory the
training costs, and copy-on-read growth shows there first). CPU utilisation is the
process tree's CPU seconds over wall seconds, in percent of one core.

For the DataLoader analysis each sample also carries running totals: CPU seconds of the
training process (``cpu_main_s``) and of its child processes (``cpu_workers_s``: the
workers build the batches when ``num_workers > 0``), the seconds those children waited
for a free core (``runq_workers_s``, Linux), and how busy the whole machine was since the
last sample (``sys_busy``, 0..1 of all logical CPUs), and the seconds the main thread
waited for a core (``runq_main_s``, Linux: slow steps on a loaded machine are told from
warm-up by it), and the CPU seconds the children counted in ``cpu_workers_s`` spent
starting up before their first batch (``cpu_workers_startup_s``: forked DataLoader
workers, probe/worker_startup.py). The totals never go down.

A child's CPU time after the last sample that saw it alive, and all of a child that
started and ended between two samples, would be lost to readings of live children alone:
8 workers started again for 2 batches at each short epoch read 0.09 s in all where their
batches alone cost 0.31 s (4 epochs x 256 samples x 0.3 ms). So exited children count
through the training process's own reaped-children CPU time (``getrusage(RUSAGE_CHILDREN)``,
POSIX: torch's DataLoader joins the workers it shuts down, so their whole CPU time is
there), and live ones through ``/proc`` (their own and their reaped children's). While the machine is short of memory a sample also
names the largest other programs (``others``, see :mod:`.others`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from .. import events
from ..devices import DeviceBackend
from ..events.payloads import MemFields
from . import fdguard, others

FAST_INTERVAL = 0.5
SLOW_INTERVAL = 2.0
SLOW_AFTER = 600.0
"""After ten minutes a sample every 2 s is plenty and keeps long recordings small."""
STARTUP_WAIT = 5.0
"""Seconds a worker's start-up waits for the sampler to see the worker (2 samples at most)."""


class Host(Protocol):
    """The thread a sampler runs on (``probe.channel.Channel``)."""

    @property
    def interval(self) -> float: ...

    @property
    def inline(self) -> bool: ...

    def beside(self, task: Callable[[], None]) -> None: ...

    def flush_soon(self) -> None: ...


class MemorySampler:
    def __init__(
        self,
        emit: Callable[..., None],
        backend_fn: Callable[[], DeviceBackend],
        clock: Callable[[], float],
        on_error: Callable[[BaseException], None],
        before_sample: Callable[[], None] | None = None,
        startups: Callable[[], dict[int, tuple[int, float]]] | None = None,
    ) -> None:
        import psutil

        self._on_error = on_error
        self._before_sample = before_sample
        self._psutil = psutil
        self._emit = emit
        self._backend_fn = backend_fn
        self._clock = clock
        self._proc = psutil.Process()
        self._stop = threading.Event()
        self._cpu_prev: tuple[float, float] | None = None
        self._children: dict[int, Any] = {}
        self._child_cpu: dict[int, float] = {}
        self._child_runq: dict[int, float] = {}
        self._gone_cpu = 0.0
        self._gone_runq = 0.0
        self._reaped_base = _reaped_cpu()
        self._workers_cpu = 0.0
        self._startups = startups
        self._startup_s = 0.0
        self._startup_pending: dict[int, tuple[int, float, float]] = {}
        self._ever: set[int] = set()
        self._sys_prev: Any = None
        self._others_at = float("-inf")
        self._lock = threading.Lock()
        """One sample at a time: the host's and the final one that ``Probe.close`` takes."""
        self._started: float | None = None
        self._host: Host | None = None
        self._due = float("-inf")
        self._slack = 0.0

    def start(self, host: Host) -> None:
        """Sample at ``host``'s wakes from now on, the first at once."""
        # a sample is due half a wake early: wakes every 0.25 s sample every second one,
        # not every third when a wake comes a hair before the due time
        self._slack = host.interval / 2
        self._host = host
        self._started = self._clock()
        host.beside(self.tick)
        host.flush_soon()

    def stop(self) -> None:
        self._stop.set()

    def tick(self) -> None:
        """One wake of the host: a sample if one is due. An error is reported once,
        through the probe (it then knows the instrument is off and takes no final sample
        either), and no sample follows."""
        if self._stop.is_set() or self._started is None:
            return
        now = self._clock()
        if now < self._due:
            return
        try:
            if self._before_sample is not None:
                self._before_sample()
            self.sample()
        except Exception as exc:
            self._stop.set()
            self._on_error(exc)
            return
        interval = FAST_INTERVAL if now - self._started < SLOW_AFTER else SLOW_INTERVAL
        self._due = now + interval - self._slack

    def _tree(self) -> list[Any]:
        """The process and its live children, reusing Process objects (cpu_times deltas)."""
        procs = [self._proc]
        pids = _descendants(self._proc.pid)
        if pids is None:  # not Linux, or a kernel without the children files
            try:
                kids = {kid.pid: kid for kid in self._proc.children(recursive=True)}
            except self._psutil.Error:
                kids = {}
        else:
            kids = {}
            for pid in pids:
                known = self._children.get(pid)
                if known is None:
                    try:
                        known = self._psutil.Process(pid)
                    except self._psutil.Error:
                        continue  # gone already
                kids[pid] = known
        alive: dict[int, Any] = {}
        for pid, kid in kids.items():
            alive[pid] = self._children.get(pid, kid)
        self._children = alive
        procs.extend(alive.values())
        return procs

    def sample(self) -> None:
        # every /proc file this reads is opened and closed under the descriptor lock: the
        # script's os.closerange() waits for it, so our close never hits its file
        with self._lock, fdguard.held():
            fields = self._read_processes()
        try:
            figures = self._backend_fn().memory()
        except Exception:
            figures = None
        if figures is not None:
            fields["device"] = figures.as_dict()
        self._emit(events.KIND_MEM, **fields)

    def _read_processes(self) -> MemFields:
        ps = self._psutil
        rss = 0
        rss_children = 0
        cpu_total = 0.0
        cpu_main = None
        # in this order: a start-up taken now was written by a child that the readings below
        # hold (alive, a zombie, or reaped), and a child reaped between two readings is
        # missed once (the total holds) rather than counted twice
        taken = self._startups() if self._startups is not None else {}
        reaped = _reaped_cpu()
        procs = self._tree()
        for n, proc in enumerate(procs):
            try:
                with proc.oneshot():
                    mem = proc.memory_info().rss
                    times = proc.cpu_times()
            except ps.Error:
                continue
            cpu_total += times.user + times.system
            if n == 0:
                rss = mem
                cpu_main = times.user + times.system
            else:
                rss_children += mem
                # with its own reaped children's: a worker's subprocess ends in its parent's
                # figure, and the parent's in ours once it is reaped
                self._child_cpu[proc.pid] = (times.user + times.system + getattr(times, "children_user", 0.0)
                                             + getattr(times, "children_system", 0.0))
                runq = _runq(proc.pid)
                if runq is not None:
                    # a thread that exited takes its share with it: never let a total go down
                    self._child_runq[proc.pid] = max(runq, self._child_runq.get(proc.pid, 0.0))
        self._forget_gone({p.pid for p in procs[1:]})
        if reaped is not None and self._reaped_base is not None:
            workers_cpu = max(0.0, reaped - self._reaped_base) + sum(self._child_cpu.values())
        else:  # no getrusage (not POSIX): an exited child's last reading
            workers_cpu = self._gone_cpu + sum(self._child_cpu.values())
        self._workers_cpu = max(self._workers_cpu, workers_cpu)
        now = time.monotonic()
        self._count_startups(taken, now, reaped is not None)
        cpu_pct = None
        if self._cpu_prev is not None:
            dt = now - self._cpu_prev[0]
            if dt > 0:
                cpu_pct = max(0.0, (cpu_total - self._cpu_prev[1]) / dt * 100.0)
        self._cpu_prev = (now, cpu_total)
        vm = ps.virtual_memory()
        swap_used = _swap_used(ps)
        busy, steal = self._machine_shares()
        fields: MemFields = {
            "rss": rss,
            "rss_children": rss_children,
            "workers": len(procs) - 1,
            "sys_available": vm.available,
            "sys_total": vm.total,
            "swap_used": swap_used,
            "cpu_pct": None if cpu_pct is None else round(cpu_pct, 1),
            "cpu_main_s": None if cpu_main is None else round(cpu_main, 4),
            "cpu_workers_s": round(self._workers_cpu, 4),
            "cpu_workers_startup_s": round(self._startup_s, 4),
            "runq_workers_s": round(self._gone_runq + sum(self._child_runq.values()), 4) if self._child_runq or self._gone_runq else None,
            "sys_busy": busy,
            "sys_steal": steal,
            "runq_main_s": _runq_thread(self._proc.pid, self._proc.pid),
        }
        # rarer on the training thread (the channel's inline wakes)
        every = others.EVERY_INLINE if self._host is not None and getattr(self._host, "inline", False) else others.EVERY
        if vm.total and vm.available <= others.BELOW * vm.total and now - self._others_at >= every:
            self._others_at = now
            try:
                fields["others"] = others.largest_others(ps, {p.pid for p in procs} | {self._proc.pid})
            except Exception:
                pass  # a note for the diagnosis only: never a fault of the sampler
        return fields

    def _count_startups(self, taken: dict[int, tuple[int, float]], now: float, reaped: bool) -> None:
        """Add the start-ups of children whose CPU time the totals hold: seen alive at a
        sample, or a child of this process once its reaped children's time is counted (a
        worker that started and ended between two samples). Another start-up waits a few
        seconds to be seen, and one never seen (none of its CPU time was counted) is dropped."""
        self._ever.update(self._child_cpu)
        own = self._proc.pid
        for pid, (ppid, cpu) in taken.items():
            self._startup_pending[pid] = (ppid, cpu, now)
        for pid, (ppid, cpu, at) in list(self._startup_pending.items()):
            if pid in self._ever or (reaped and ppid == own):
                self._startup_s += cpu
                del self._startup_pending[pid]
            elif now - at > STARTUP_WAIT:
                del self._startup_pending[pid]

    def _forget_gone(self, alive: set[int]) -> None:
        """Fold the last readings of exited children into the running totals."""
        for pid in [p for p in self._child_cpu if p not in alive]:
            self._gone_cpu += self._child_cpu.pop(pid)
        for pid in [p for p in self._child_runq if p not in alive]:
            self._gone_runq += self._child_runq.pop(pid)

    def _machine_shares(self) -> tuple[float | None, float | None]:
        """Share of all logical CPUs busy since the last sample (any process), and the share
        a hypervisor took from this VM's CPUs meanwhile (Linux's ``steal`` column of
        /proc/stat through ``psutil.cpu_times``; None elsewhere)."""
        try:
            now = self._psutil.cpu_times()
        except Exception:
            return None, None
        prev, self._sys_prev = self._sys_prev, now
        if prev is None:
            return None, None
        total = _cpu_total(prev, now)
        steal = _steal_share(prev, now, total)
        idle = (now.idle + getattr(now, "iowait", 0.0)) - (prev.idle + getattr(prev, "iowait", 0.0))
        if total <= 0:
            return None, steal
        busy: float = min(1.0, max(0.0, 1.0 - idle / total))
        return round(busy, 3), steal


def _cpu_total(prev: Any, now: Any) -> float:
    """All CPU time between two ``cpu_times`` readings; guest time is also counted in user
    on Linux, so it is left out."""
    guest = (getattr(now, "guest", 0.0) + getattr(now, "guest_nice", 0.0)) - \
        (getattr(prev, "guest", 0.0) + getattr(prev, "guest_nice", 0.0))
    return float(sum(now) - sum(prev) - guest)


def _steal_share(prev: Any, now: Any, total: float) -> float | None:
    """Share of all CPU time between two ``cpu_times`` readings (``total``:
    :func:`_cpu_total` of them) that was stolen (a VM's vCPUs kept waiting by the
    hypervisor): time a thread is neither on a CPU nor in the guest's run queue. None where
    ``steal`` is not reported (not Linux)."""
    if not hasattr(now, "steal") or not hasattr(prev, "steal"):
        return None
    if total <= 0:
        return None
    share: float = min(1.0, max(0.0, (now.steal - prev.steal) / total))
    return round(share, 4)


def _swap_used(psutil: Any) -> int | None:
    """Bytes of swap in use: ``SwapTotal - SwapFree`` of ``/proc/meminfo`` (Linux), as
    ``psutil.swap_memory().used`` computes them, without its second file: psutil also
    parses ``/proc/vmstat`` (~150 lines) for page-in counts never used here, which was 40%
    of a sample's CPU and two more files opened under the GIL at every sample (and it
    warns, into the script's warnings, where that file is unreadable). Elsewhere psutil's."""
    try:
        with open("/proc/meminfo", "rb") as fh:
            total = free = None
            for line in fh:
                if line.startswith(b"SwapTotal:"):
                    total = int(line.split()[1]) * 1024
                elif line.startswith(b"SwapFree:"):
                    free = int(line.split()[1]) * 1024
                if total is not None and free is not None:
                    return total - free
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(psutil.swap_memory().used)
    except Exception:
        return None


def _reaped_cpu() -> float | None:
    """CPU seconds of this process's exited children that it has waited for (and of theirs,
    that they waited for), or None where ``getrusage`` is missing (Windows)."""
    try:
        import resource

        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    except (ImportError, OSError, ValueError):
        return None
    return usage.ru_utime + usage.ru_stime


def _descendants(pid: int) -> list[int] | None:
    """Linux: the process's descendants from ``/proc/<pid>/task/<tid>/children``, or None
    where those files are missing (another OS, a kernel without CONFIG_PROC_CHILDREN).

    psutil's ``children(recursive=True)`` reads the parent of every process on the machine
    to find them: 1.8 ms with 65 processes here, and every sample pays it, holding the GIL
    the training needs for part of it; these files name a process's children directly
    (0.15 ms). A child started between two reads is seen at the next sample."""
    if not os.path.exists(f"/proc/{pid}/task/{pid}/children"):
        return None
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    found: list[int] = []
    todo = [(pid, tids)]
    while todo:
        parent, threads = todo.pop()
        for tid in threads:
            try:
                with open(f"/proc/{parent}/task/{tid}/children", "rb") as fh:
                    kids = [int(k) for k in fh.read().split()]
            except (OSError, ValueError):  # a thread or process that just ended
                continue
            for kid in kids:
                if kid not in found:
                    found.append(kid)
                    try:
                        todo.append((kid, os.listdir(f"/proc/{kid}/task")))
                    except OSError:
                        pass
    return found


def _runq_thread(pid: int, tid: int) -> float | None:
    """Seconds one thread (the main one: the training's) waited for a CPU (Linux), or None."""
    try:
        with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as fh:
            return round(int(fh.read(128).split()[1]) / 1e9, 4)
    except (OSError, IndexError, ValueError):
        return None


def _runq(pid: int) -> float | None:
    """Seconds the process's threads together waited for a CPU.

    All threads, not only the main one: a DataLoader worker's result-queue feeder thread
    pickles each batch, and its resource-sharer thread hands the tensors' file descriptors
    to the training process while that waits, so their queuing delays the batch too.
    """
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        tids = []
    total, seen = 0.0, False
    for tid in tids or [str(pid)]:
        path = f"/proc/{pid}/task/{tid}/schedstat" if tids else f"/proc/{pid}/schedstat"
        try:
            with open(path, "rb") as fh:
                total += int(fh.read(128).split()[1]) / 1e9
                seen = True
        except (OSError, IndexError, ValueError):
            continue
    return total if seen else None
