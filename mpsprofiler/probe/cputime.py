"""Where a thread's time goes while it waits for a batch: on a CPU, queued for one, or asleep.

Wall time alone cannot tell a DataLoader that computes (decoding, augmenting: more
processes help only while cores are free) from one that waits for a disk or network (more
workers help regardless of cores) or from one whose process is waiting for a free core
(the machine is busy: more workers make it worse). Two cheap readings (~1 µs each alone) split
it:

* ``time.thread_time()``: CPU seconds of the calling thread (every platform);
* ``/proc/thread-self/schedstat`` (Linux with scheduler statistics): its second field is
  the nanoseconds the thread spent runnable but waiting for a CPU (the run queue).
  Read with ``pread`` on a descriptor opened once, so no file is opened per batch, and
  not at all while the thread has been on a CPU since the last read (see ``read``).

Both are system calls, the only ones the probe makes on the training thread: in a training
loop each costs several times what it does alone (what it evicts, a busy core), so past the
first fetches they are made at some fetches only and the others are estimated from those
(see ``FetchClock``).
"""

from __future__ import annotations

import os
import random
import threading
import time
from typing import Any

from . import fdguard

SCHEDSTAT = "/proc/thread-self/schedstat"
RUNQ_SLACK = 10e-6
"""Off-CPU seconds since the last run-queue read below which the reading is not repeated:
what a skipped read can leave out of one batch's run-queue time (see ``read``). 10 µs is
2% of a 0.5 ms step, and a wait for a CPU that matters to a finding is a share of the
step (tenths of it), so no verdict turns on it; at 2 µs the skips failed on jitter alone
(the two clocks are read ~0.1 µs apart, interrupts) and a real read came every few steps."""
RUNQ_SPAN = 0.02
"""Seconds after which the run queue is read anyway: the off-CPU time is the wall clock's
time less the CPU clock's, and the wall clock may be slewed against the CPU clock by up
to 500 ppm (the kernel's ``MAXFREQ`` for NTP adjustments; the scheduler's clock is not
slewed), 10 µs over 20 ms: with ``RUNQ_SLACK``, a skipped read leaves out at most 20 µs."""
_thread_time = time.thread_time
_get_ident = threading.get_ident


_FORKS = [0]
"""Forks this process went through (a child counts one more than its parent): tells a
forked child's readings from its parent's without ``os.getpid()``, a system call per read."""


def _forked() -> None:
    _FORKS[0] += 1


try:
    os.register_at_fork(after_in_child=_forked)
except AttributeError:  # not a POSIX system: no fork
    pass


class ThreadClock:
    """CPU time and run-queue delay of the thread that opened it (the training thread)."""

    def __init__(self) -> None:
        self._fd: int | None = None
        self._owner: int | None = None
        self._forks = _FORKS[0]
        self._runq_ok = True
        self._last: tuple[float, float, float] | None = None
        """(wall time, CPU time, run-queue seconds) of the last run-queue read (see ``read``)."""

    def cpu(self) -> float:
        return _thread_time()

    def read(self, now: float) -> tuple[float, float | None]:
        """``(cpu(), runq())`` at wall time ``now`` (taken just before): twice per fetch read.

        The run-queue reading is skipped when it cannot have changed: since the last
        reading the thread spent all but ``RUNQ_SLACK`` of the wall time on a CPU (its CPU
        time says so), and a thread cannot wait for a CPU while it runs on one; at least
        every ``RUNQ_SPAN`` it is read all the same. What skipped reads miss is under
        ``RUNQ_SLACK`` in all, plus the wall clock's slew over at most ``RUNQ_SPAN``, since
        the last real read, which is the reference, never a skipped one.

        Why skip: a real read is a ``pread`` of ``/proc``, ~1 µs alone and ~14 µs inside a
        training loop (measured: 0.37 reads per step cost the 0.55 ms MLP step of
        ``benchmarks/step_cost.py`` ~5 µs); with these bounds ~0.08 reads per step remain."""
        cpu = _thread_time()
        last = self._last
        if last is not None:
            # the common case first, in the fewest operations (twice per batch): the thread
            # has been on a CPU since the last real read, which this thread made
            span = now - last[0]
            if span < RUNQ_SPAN and span - (cpu - last[1]) < RUNQ_SLACK and self._owner == _get_ident() \
                    and self._forks == _FORKS[0]:
                return cpu, last[2]
        fd = self._fd
        if fd is None or not self._runq_ok or self._owner != _get_ident() or self._forks != _FORKS[0] \
                or not fdguard.still_ours(fd):
            runq = self.runq()
        else:
            try:
                runq = int(os.pread(fd, 128, 0).split()[1]) / 1e9
            except (OSError, IndexError, ValueError):
                self._runq_ok = False
                runq = None
        if runq is not None:
            self._last = (now, cpu, runq)
        elif self._owner == _get_ident():
            self._last = None  # the clock failed: no later read is skipped to its last value
        return cpu, runq

    def runq(self) -> float | None:
        """Seconds this thread has waited for a CPU so far, or None where unknown."""
        if not self._runq_ok:
            return None
        ident = threading.get_ident()
        if self._fd is None:
            try:
                self._fd = os.open(SCHEDSTAT, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            except OSError:
                self._runq_ok = False
                return None
            fdguard.own(self._fd)
            self._owner = ident
        if ident != self._owner or self._forks != _FORKS[0]:
            return None  # another thread (or a forked child) reads a different clock
        if not fdguard.still_ours(self._fd):
            self._fd = None  # the script closed it (os.closerange): the number is not ours
            self._runq_ok = False
            return None
        try:
            fields = os.pread(self._fd, 128, 0).split()
            return int(fields[1]) / 1e9
        except (OSError, IndexError, ValueError):
            self._runq_ok = False
            return None

    def close(self) -> None:
        if self._fd is not None and self._forks == _FORKS[0]:
            with fdguard.held():
                if fdguard.still_ours(self._fd):
                    fdguard.disown(self._fd)
                    try:
                        os.close(self._fd)
                    except OSError:
                        pass
        self._fd = None


EXACT_FETCHES = 256
"""Fetches of a run whose clocks are all read: a short run's figures are exact."""
READ_EVERY = 8
"""Past ``EXACT_FETCHES``, one fetch in ``READ_EVERY`` on average has its clocks read
(``READ_GAPS``), and every fetch that follows a wait of ``READ_AFTER`` or more."""
_draw = random.Random(0x6D707370).randint
READ_GAPS: tuple[int, ...] = tuple(_draw(1, 2 * READ_EVERY - 1) for _ in range(251))
"""The gaps between the fetch counts read past ``EXACT_FETCHES``: uniform in 1 .. 2 *
``READ_EVERY`` - 1 (mean ``READ_EVERY``), fixed (a run's schedule repeats), 251 of them
(a prime: the schedule's period, ~2,000 fetches, matches no loader's cycle).

Why not every ``READ_EVERY``-th fetch: a loader's waits are often periodic (with N workers
a starved loader waits at every N-th batch, the others are ready in the queue), and a
fixed stride that divides the period reads the same phase every time: only the ready
batches (the waits then get the ready ones' CPU share: a loader that sleeps told as one
that computes) or only the waits. Counts drawn apart by these gaps meet every phase alike,
and, chosen by the count alone, never by a fetch's length, they are a fair sample of all."""
LONG_FETCH = 200e-6
"""The two kinds a fetch that is not read is estimated apart by (``FetchClock.ratios``):
below this wall time a batch that was ready (in a worker's queue) or cheap to build, at or
above it one that was waited for or computed at length."""
READ_AFTER = 20e-3
"""A fetch of at least this wall time gets the next fetch's clocks read: waits that long
come in runs (a starved loader, workers starting), and each read then is exact. Reading
costs two or three system calls, ~1-15 µs each inside a training loop on a virtual machine
(benchmarks/RESULTS.md, sessions 50 and 61), under 0.2% of a step this long.

Why not at ``LONG_FETCH``: a DataLoader without workers that collates 64 samples takes
~0.2 ms a batch (the MLP of ``benchmarks/step_cost.py`` on a 2-core VM: 184-214 µs), so half
or all of such a loop's fetches were "long" and every fetch was read: two system calls a
step, ~15 µs of a 0.5 ms step (session 61), against one read in ``READ_EVERY``."""


class FetchClock:
    """CPU time and run-queue delay of each DataLoader fetch of the training thread: read
    (``ThreadClock``, two system calls per fetch) at the first ``EXACT_FETCHES`` fetches, at
    counts ``READ_GAPS`` apart after them and at every one after a wait of ``READ_AFTER``;
    estimated at the others.

    Why: measured in the MLP loop of ``benchmarks/syscall_share.py``, the two calls made a
    third of the probe's per-step cost on a virtual machine (benchmarks/RESULTS.md).

    The estimate is honest because of who is read: the fetches not read are all of one
    kind, those after a fetch shorter than ``READ_AFTER``, and of that kind the fetches read
    are those whose count is due (``READ_GAPS``: the count, never a fetch's length, picks
    them; a read after a long wait is kept out of the sums). Among the read ones, the
    ratio of CPU (and run-queue) time to wall time of those as long as the fetch estimated
    (short or long, ``LONG_FETCH``) is an unbiased sample of theirs, and the fetch is given
    its wall time times that ratio: sums over many steps, what the loader findings read,
    converge to what reading every fetch gives. (One ratio for both lengths would let the
    rare long fetch that ends a run of short ones, waiting where the short ones compute,
    swing the short ones' estimate.)

    This holds the readings and the sums; the schedule and the estimate are the step
    tracker's fetch path (``steps.StepTracker.on_fetch_start``/``on_fetch_end``), which
    runs at every batch: there a fetch that is not read makes no call at all (issue 34)."""

    __slots__ = ("_clock", "after_wait", "_sums", "ratios")

    def __init__(self, clock: ThreadClock) -> None:
        self._clock = clock
        self.after_wait = True
        """The last fetch lasted ``READ_AFTER`` or more (the run's first fetch counts as
        one): the next one is read whatever its count."""
        self._sums: list[list[Any]] = [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
        """Per own length (short, long: ``LONG_FETCH``): wall, CPU and run-queue seconds
        (None: a run-queue reading was missing) of the fetches read by their count, those
        that did not follow a wait of ``READ_AFTER``."""
        self.ratios: list[tuple[float, float, float | None] | None] = [None, None]
        """Per length (short, long), the sums a fetch of that length not read is estimated
        from: its own length's, the other's while its own has none, None while neither has
        any (the fetch's CPU time is then its wall time, its run-queue time unknown). They
        change only when a read fetch adds to the sums, so they are chosen then, not at
        every fetch estimated."""

    def read_start(self, now: float) -> tuple[float, float | None, bool]:
        """The readings at the start of a fetch that is read (``now``: the wall clock just
        before)."""
        cpu, runq = self._clock.read(now)
        return cpu, runq, self.after_wait

    def read_end(self, started: tuple[float, float | None, bool], now: float,
                 wall: float) -> tuple[float, float | None]:
        """At the end of a fetch read at its start (``started``: :meth:`read_start`'s): its
        CPU seconds and run-queue seconds (None where unknown), added to the sums."""
        long = wall >= LONG_FETCH
        self.after_wait = wall >= READ_AFTER
        cpu0, runq0, after_wait = started
        clock = self._clock
        cpu1, runq1 = clock.read(now) if runq0 is not None else (clock.cpu(), None)
        cpu = cpu1 - cpu0
        if cpu < 0.0:
            cpu = 0.0
        runq = None if runq1 is None or runq0 is None else max(0.0, runq1 - runq0)
        if not after_wait:
            sums = self._sums[long]
            sums[0] += wall
            sums[1] += cpu
            if runq is None:
                sums[2] = None
            elif sums[2] is not None:
                sums[2] += runq
            short, longer = self._sums
            own = (short[0], short[1], short[2]) if short[0] > 0.0 else None
            other = (longer[0], longer[1], longer[2]) if longer[0] > 0.0 else None
            self.ratios = [own or other, other or own]
        return cpu, runq
