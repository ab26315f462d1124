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

On Linux the readings are made from ``/proc`` directly (:mod:`.procfs`): psutil's took
0.73 ms of CPU a sample inside a 1 ms-step training, most of it holding the GIL (issue 34).
psutil reads them elsewhere (macOS), and where a kernel lacks the ``children`` files.
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
from . import fdguard, others, procfs

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
        self._procfs = procfs.usable(self._proc.pid)
        """The tree and its figures are read from ``/proc`` directly (Linux), else by psutil."""
        self._meminfo = os.path.exists("/proc/meminfo")
        """System memory and CPU times are read from ``/proc`` directly (Linux), else by psutil."""
        self._cpu_kind: Any = None
        """The named tuple of ``psutil.cpu_times()``, which :func:`procfs.cpu_times` fills."""
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

    def _tree_psutil(self) -> list[tuple[int, list[str] | None]]:
        """The process and its live children as psutil finds them (not Linux, or a kernel
        without the ``children`` files), the process first; their Process objects are kept
        from sample to sample (``_children``)."""
        procs: list[Any] = [self._proc]
        try:
            kids = {kid.pid: kid for kid in self._proc.children(recursive=True)}
        except self._psutil.Error:
            kids = {}
        alive: dict[int, Any] = {}
        for pid, kid in kids.items():
            alive[pid] = self._children.get(pid, kid)
        self._children = alive
        procs.extend(alive.values())
        return [(proc.pid, None) for proc in procs]

    def _figures_psutil(self, pid: int) -> procfs.ProcessFigures | None:
        proc = self._proc if pid == self._proc.pid else self._children[pid]
        try:
            with proc.oneshot():
                mem = proc.memory_info().rss
                times = proc.cpu_times()
        except self._psutil.Error:
            return None
        return procfs.ProcessFigures(mem, times.user, times.system, getattr(times, "children_user", 0.0),
                                     getattr(times, "children_system", 0.0))

    def _tree_procfs(self) -> list[tuple[int, list[str] | None]]:
        """The process and its live children from ``/proc`` (Linux), the process first, each
        child with its threads' ids (``procfs.runq`` reads them): none looked for, and no
        file opened, where the process has no child at all (the common case: no DataLoader
        workers)."""
        own = self._proc.pid
        kids = {} if procfs.childless(own) else procfs.descendants(own)
        return [(own, None), *kids.items()]

    def _figures_procfs(self, pid: int) -> procfs.ProcessFigures | None:
        try:
            return procfs.process(pid)
        except (OSError, ValueError, IndexError):  # it ended meanwhile
            return None

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
        if self._procfs:
            tree, read = self._tree_procfs(), self._figures_procfs
        else:
            tree, read = self._tree_psutil(), self._figures_psutil
        for n, (pid, tids) in enumerate(tree):
            got = read(pid)
            if got is None:
                continue
            cpu = got.user + got.system
            cpu_total += cpu
            if n == 0:
                rss = got.rss
                cpu_main = cpu
            else:
                rss_children += got.rss
                # with its own reaped children's: a worker's subprocess ends in its parent's
                # figure, and the parent's in ours once it is reaped
                self._child_cpu[pid] = cpu + got.children_user + got.children_system
                runq = procfs.runq(pid, tids)
                if runq is not None:
                    # a thread that exited takes its share with it: never let a total go down
                    self._child_runq[pid] = max(runq, self._child_runq.get(pid, 0.0))
        pids = {pid for pid, _ in tree}
        self._forget_gone(pids - {tree[0][0]})
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
        total, available, swap_used = self._system_memory()
        busy, steal = self._machine_shares()
        fields: MemFields = {
            "rss": rss,
            "rss_children": rss_children,
            "workers": len(tree) - 1,
            "sys_available": available,
            "sys_total": total,
            "swap_used": swap_used,
            "cpu_pct": None if cpu_pct is None else round(cpu_pct, 1),
            "cpu_main_s": None if cpu_main is None else round(cpu_main, 4),
            "cpu_workers_s": round(self._workers_cpu, 4),
            "cpu_workers_startup_s": round(self._startup_s, 4),
            "runq_workers_s": round(self._gone_runq + sum(self._child_runq.values()), 4) if self._child_runq or self._gone_runq else None,
            "sys_busy": busy,
            "sys_steal": steal,
            "runq_main_s": procfs.runq_thread(self._proc.pid, self._proc.pid),
        }
        # rarer on the training thread (the channel's inline wakes)
        every = others.EVERY_INLINE if self._host is not None and getattr(self._host, "inline", False) else others.EVERY
        if total and available <= others.BELOW * total and now - self._others_at >= every:
            self._others_at = now
            try:
                fields["others"] = others.largest_others(ps, pids)
            except Exception:
                pass  # a note for the diagnosis only: never a fault of the sampler
        return fields

    def _system_memory(self) -> tuple[int, int, int | None]:
        """Total and available memory, and swap in use (None where unknown): from one read
        of ``/proc/meminfo`` on Linux (psutil read it twice, and its swap figure parsed
        ``/proc/vmstat`` too, for page-in counts never sent), else psutil's."""
        mem = procfs.system_memory() if self._meminfo else None
        total, available, swap = mem if mem is not None else (0, None, None)
        if available is None:
            vm = self._psutil.virtual_memory()
            total, available = vm.total, vm.available
        if swap is None:
            try:
                swap = int(self._psutil.swap_memory().used)
            except Exception:
                swap = None
        return total, available, swap

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
            if self._cpu_kind is not None:
                now = procfs.cpu_times(self._cpu_kind)
            else:
                now = self._psutil.cpu_times()
                if self._meminfo:
                    self._cpu_kind = type(now)
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


def _reaped_cpu() -> float | None:
    """CPU seconds of this process's exited children that it has waited for (and of theirs,
    that they waited for), or None where ``getrusage`` is missing (Windows)."""
    try:
        import resource

        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    except (ImportError, OSError, ValueError):
        return None
    return usage.ru_utime + usage.ru_stime
