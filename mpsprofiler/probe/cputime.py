"""Where a thread's time goes while it waits for a batch: on a CPU, queued for one, or asleep.

Wall time alone cannot tell a DataLoader that computes (decoding, augmenting: more
processes help only while cores are free) from one that waits for a disk or network (more
workers help regardless of cores) or from one whose process is waiting for a free core
(the machine is busy: more workers make it worse). Two cheap readings (~2 µs each) split
it:

* ``time.thread_time()``: CPU seconds of the calling thread (every platform);
* ``/proc/thread-self/schedstat`` (Linux with scheduler statistics): its second field is
  the nanoseconds the thread spent runnable but waiting for a CPU (the run queue).
  Read with ``pread`` on a descriptor opened once, so no file is opened per batch.
"""

from __future__ import annotations

import os
import threading
import time

from . import fdguard

SCHEDSTAT = "/proc/thread-self/schedstat"


class ThreadClock:
    """CPU time and run-queue delay of the thread that opened it (the training thread)."""

    def __init__(self) -> None:
        self._fd: int | None = None
        self._owner: int | None = None
        self._pid = os.getpid()
        self._runq_ok = True

    def cpu(self) -> float:
        return time.thread_time()

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
        if ident != self._owner or os.getpid() != self._pid:
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
        if self._fd is not None and os.getpid() == self._pid:
            with fdguard.held():
                if fdguard.still_ours(self._fd):
                    fdguard.disown(self._fd)
                    try:
                        os.close(self._fd)
                    except OSError:
                        pass
        self._fd = None
