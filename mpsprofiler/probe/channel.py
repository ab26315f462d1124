"""The probe's side of the private event channel.

The training thread only appends encoded lines to a bounded in-memory buffer; a daemon
thread writes them to the inherited pipe with a non-blocking fd. Whatever happens to the
parent (stopped, killed, slow), a write never blocks the training and never raises into
it: a dead reader switches the channel off, a full buffer drops events and counts them.
If the script closes the descriptor and its number is reused for one of the script's
own files, the channel notices (device and inode changed) and stops instead of writing
into that file.

What the pipe cannot take is not lost when the launcher gave a spill file
(``MPSPROF_SPILL``, in a private folder of the parent): once the script closed our
descriptor, the parent stopped reading while the buffer grew past :data:`SPILL_AT`, or
the pipe is still full at exit, every further line goes to that file instead (never
back to the pipe, so the order holds), and the parent appends it after the pipe's
content. Only what neither can take is dropped, and counted.

The same wake runs the probe's other periodic work (:meth:`Channel.beside`: the memory
sampler), right before the flush that sends what it emitted: one wake schedule instead of
two. The wakes are few: :data:`INTERVAL` while a live view shows the events as they come,
:data:`HEADLESS_INTERVAL` when nobody reads them before the run ends.

Inline or threaded. A process with a second OS thread pays for it at every allocation:
glibc's malloc takes its arena lock on every call once ``__libc_single_threaded`` is
cleared by the first ``pthread_create``, never set again, and libstdc++'s ``shared_ptr``
counts go atomic (torch allocates ~1,350 times in a 0.87 ms MLP step: +2.3% with a
sleeping extra thread, benchmarks/RESULTS.md, session 56). So where the training process
started no second thread when the probe starts (Linux: :func:`single_threaded`), the
channel starts none: its wakes run **inline** on the training thread (:meth:`Channel.tick`),
when :attr:`Channel.due` has passed, from the step boundary (``StepTracker._close``, timed
apart from the step), from the garbage collector outside the steps (imports, model
building, a long evaluation: probe/inline_wakes.py) and at exit. A due wake first asks
whether the process started a thread meanwhile (an OpenMP pool, CUDA's, a pin-memory
thread, a DataLoader's queue feeder): the allocator pays anyway then, and the channel
starts its thread (a live view then gets the events even while the training blocks); so
does :meth:`Channel.go_threaded` (the terminal loan: the script blocks in ``input()`` until
the app answers a request that must go out meanwhile).
Elsewhere the thread starts at once: macOS's libmalloc takes its locks whatever the
thread count, so a thread costs nothing there that inline wakes would save, and a thread
keeps the live view fed while the training blocks. ``MPSPROF_CHANNEL_THREAD=1`` forces
the thread (debugging).
"""

from __future__ import annotations

import os
import select
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from ..events.payloads import ByeFields
from . import fdguard

MAX_BUFFERED_BYTES = 16 * 1024 * 1024
"""Past this the parent is not reading: drop rather than grow the training's memory."""
SPILL_AT = 4 * 1024 * 1024
"""Buffered bytes with a blocked pipe past which lines go to the spill file."""
INTERVAL = 0.25
"""Seconds between flushes while a live view (the TUI) shows the steps: it redraws once a
second (``tui/app.py``'s ``REDRAW_EVERY``), so a step reaches it within a redraw and a
quarter."""
HEADLESS_INTERVAL = 0.5
"""Seconds between flushes when no live view reads the events (``mpsprof run --headless``):
the memory sampler's own interval (``sampler.FAST_INTERVAL``), so each wake samples and
sends at once, and a process killed without warning loses at most half a second of steps
(its last memory sample went out with the wake that took it)."""
THREADED_ENV = "MPSPROF_CHANNEL_THREAD"
"""``0`` (or empty) runs the channel's wakes inline where the process has one thread (see
:func:`threaded_because`); unset or anything else: the channel's thread in every process."""


class Channel:
    """Buffered, non-blocking writer of event lines to a file descriptor."""

    def __init__(self, fd: int, interval: float = INTERVAL, spill_path: str | None = None,
                 inline: bool | None = None) -> None:
        """``inline``: None decides (:func:`threaded_because`), True runs the wakes on the
        caller's thread (:meth:`tick`), False starts the thread."""
        self._fd = fd
        self._spill_path = spill_path
        self._spill: Any = None
        self._spill_identity: tuple[int, int] | None = None
        self.spilling = False
        self.spill_reason = ""
        self.lost_reason = ""
        self._interval = interval
        self._buf: deque[bytes] = deque()
        self._buffered = 0
        self._pending = b""
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = False
        self.closed = False
        self.dropped = 0
        self._before_flush: list[Callable[[], None]] = []
        self._beside: list[Callable[[], None]] = []
        self._identity = _identity(fd)
        try:
            os.set_inheritable(fd, False)
            os.set_blocking(fd, False)
        except OSError:
            pass
        self._pid = os.getpid()
        self._on_threaded: list[Callable[[], None]] = []
        self._starting = threading.Lock()
        self._thread: threading.Thread | None = None
        self._ticking = False
        self.due = float("inf")
        """Inline: the ``time.perf_counter()`` reading from which a wake is due (the step
        boundary compares its own reading to it); infinite while threaded or closed."""
        self.threaded_reason = ""
        """Why the channel runs a thread ("" while inline)."""
        self.wake_spans: deque[tuple[float, float]] = deque(maxlen=16)
        """(start, end) of the last wakes, ``time.perf_counter()``. A step that a wake
        overlapped was slowed by it (~1 ms holding the GIL the training needs: the memory
        sample and the steps' drain): op accounting must not take it for a new phase
        (``StepTracker._slowed_by_wake``), and past the detail it is no peak of the step chart
        (``StepTracker.drain``), whose slowest step per batch would otherwise be the one each
        wake slowed."""
        reason = threaded_because() if inline is None else "" if inline else "asked for"
        if reason:
            self._start_thread(reason)
        else:
            self.due = time.perf_counter()  # the first wake at the first hook: hello goes out early

    @property
    def inline(self) -> bool:
        """True while the wakes run on the training thread (no thread of ours)."""
        return self._thread is None and not self._stop

    def on_flush(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` (e.g. drain pending step batches) before each periodic flush."""
        self._before_flush.append(fn)

    @property
    def interval(self) -> float:
        """Seconds between the thread's wakes (fewer when :meth:`flush_soon` asks)."""
        return self._interval

    def beside(self, task: Callable[[], None]) -> None:
        """Run ``task`` on the channel's thread at every wake, before the flush and outside
        the channel's lock (a task may take milliseconds; :meth:`send` needs no lock, and
        ``close`` must not wait for it). The task decides itself whether it is due and
        handles its own errors; one that raises anyway is dropped, never the flushes."""
        self._beside.append(task)

    def send(self, line: bytes) -> None:
        if self.closed:
            self.dropped += 1
            return
        if self._buffered + len(line) > MAX_BUFFERED_BYTES:
            self.dropped += 1
            return
        self._buf.append(line)
        self._buffered += len(line)

    def flush_soon(self) -> None:
        """Write now instead of at the next interval (threaded), or at the next hook that
        ticks (inline)."""
        if self._thread is not None:
            self._wake.set()
        elif not self._stop:
            self.due = float("-inf")

    def busy(self) -> bool:
        """In a wake or a flush (on this thread, while inline): no wake may start now."""
        return self._ticking or self._lock.locked()

    def when_threaded(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` once the wakes move to the channel's thread (the inline hooks go)."""
        self._on_threaded.append(fn)

    def go_threaded(self, reason: str) -> None:
        """Run the wakes on the channel's thread from now on (inline only; for good: the
        allocator's single-thread flag never comes back once a thread started)."""
        if self._thread is None and not self._stop and os.getpid() == self._pid:
            self._start_thread(reason)

    def _start_thread(self, reason: str) -> None:
        # once: a thread the script started may reach a wake too (its collection, its fetch)
        with self._starting:
            if self._thread is not None:
                return
            thread = threading.Thread(target=self._run, name="mpsprof-channel", daemon=True)
            try:
                thread.start()
            except RuntimeError:  # no thread to be had: the wakes stay inline
                return
            self._thread = thread
            self.threaded_reason = reason
            self.due = float("inf")
        for fn in self._on_threaded:
            try:
                fn()
            except Exception:
                pass

    def tick(self) -> float:
        """Inline: one wake on the caller's (the training) thread, as the thread's; returns
        ``time.perf_counter()`` after it, from which the training's time counts again.

        It asks :func:`single_threaded` first (30 ns): a process that started a second
        thread by now gets the channel's thread instead (see the module docstring). Never
        re-entered (a hook firing inside a wake); nothing in a forked child."""
        if self._ticking or self._thread is not None or self._stop:
            return time.perf_counter()
        self.due = float("inf")
        if os.getpid() != self._pid:
            return time.perf_counter()  # a forked child: the buffered lines are the parent's
        self._ticking = True
        try:
            if not single_threaded():
                self._start_thread(f"the process has {os_threads()} threads")
                # this wake is due: the thread makes it at once, not an interval later (a
                # DataLoader's first workers start a queue feeder thread: the memory sample
                # due then left a second's gap where a short run's steady steps begin)
                self._wake.set()
            else:
                self._wake_once()
        finally:
            self._ticking = False
            if self._thread is None and not self._stop and self.due != float("-inf"):
                self.due = time.perf_counter() + self._interval
        return time.perf_counter()

    def _run(self) -> None:
        while not self._stop:
            self._wake.wait(self._interval)
            self._wake.clear()
            if self._stop:
                break  # close() flushes what is left
            self._wake_once()

    def _wake_once(self) -> None:
        started = time.perf_counter()
        for task in list(self._beside):
            try:
                task()
            except Exception:
                self._beside.remove(task)
        self._flush_once()
        self.wake_spans.append((started, time.perf_counter()))

    def _flush_once(self) -> bool:
        """Write what can be written now; True when everything went out."""
        with self._lock:
            for fn in self._before_flush:
                try:
                    fn()
                except Exception:
                    pass
            if self.closed:
                return not self._buf
            if self.spilling:
                return self._spill_all()
            while self._buf:
                line = self._buf.popleft()
                self._buffered -= len(line)
                self._pending += line
                if len(self._pending) >= 1 << 16:
                    break
            if not self._pending:
                return not self._buf
            with fdguard.held():  # the script cannot close and reuse the number meanwhile
                return self._write_pending()

    def _write_pending(self) -> bool:
        """One write of what is pending to the pipe, if the descriptor is still ours."""
        if _identity(self._fd) != self._identity:
            # the script closed our descriptor (os.closerange) and the number now
            # names one of its own files: never write there
            self._fd = -1
            self._lost("the script closed mpsprof's event channel")
            return not self.spilling or self._spill_all()
        try:
            written = os.write(self._fd, self._pending)
            self._pending = self._pending[written:]
        except BlockingIOError:
            if self._buffered > SPILL_AT and self._start_spill("the profiler's reader fell behind"):
                return self._spill_all()
        except OSError as exc:
            # EPIPE: the parent is gone (nobody to read a spill either). Anything else:
            # the channel is unusable; a spill file may still reach the parent.
            if isinstance(exc, BrokenPipeError):
                self._drop_all()
                self.closed = True
            else:
                self._lost(f"the event channel failed ({exc.strerror or exc})")
        return not self._pending and not self._buf

    def _lost(self, reason: str) -> None:
        """The pipe is gone but the parent may be alive: spill, or drop and count."""
        self.lost_reason = reason
        if not self._start_spill(reason):
            self._drop_all()
            self.closed = True

    def _start_spill(self, reason: str) -> bool:
        if self.spilling:
            return True
        if not self._spill_path:
            return False
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0)
            fd = os.open(self._spill_path, flags, 0o600)
            os.set_inheritable(fd, False)
        except OSError:
            self._spill_path = None
            return False
        self._spill = fd
        self._spill_identity = _identity(fd)
        self.spilling = True
        self.spill_reason = reason
        return True

    def _spill_all(self) -> bool:
        """Everything pending and buffered to the spill file (channel thread or close)."""
        data = self._pending + b"".join(self._buf)
        lines = len(self._buf) + (1 if self._pending else 0)
        self._pending = b""
        self._buf.clear()
        self._buffered = 0
        try:
            with fdguard.held():
                if _identity(self._spill) != self._spill_identity:
                    raise OSError("the script closed the spill file")
                while data:
                    data = data[os.write(self._spill, data):]
        except OSError:  # a full disk: what is left is lost, and counted
            self.dropped += lines
            self.spilling = False
            self.closed = True
            self.lost_reason = self.lost_reason or "the spill file could not be written"
        return True

    def _drop_all(self) -> None:
        self.dropped += len(self._buf) + (1 if self._pending else 0)
        self._buf.clear()
        self._buffered = 0
        self._pending = b""

    def close(self, timeout: float = 3.0, last: Callable[[ByeFields | None], bytes] | None = None) -> None:
        """Flush what is buffered (waiting for the reader up to ``timeout``, less when a
        spill file can take the rest) and close. ``last`` encodes the closing line from
        :meth:`take_note` (what was dropped, and why), which follows everything else."""
        if self.closed and self._spill is None:
            return
        self._stop = True
        self.due = float("inf")
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=1.0)
        if self._spill_path and not self.spilling:
            timeout = min(timeout, 1.0)
        deadline = time.monotonic() + timeout
        with self._lock:
            self._before_flush.clear()  # the last drain was done by the probe
        while not self.closed and time.monotonic() < deadline:
            if self._flush_once():
                break
            try:
                select.select([], [self._fd], [], 0.05)
            except (OSError, ValueError):
                break
        with self._lock:
            if not self.closed and (self._buf or self._pending):
                if self._start_spill("the profiler's reader was not reading at exit"):
                    self._spill_all()
                else:
                    self._drop_all()
            if last is not None:
                try:
                    self._send_last(last(self.take_note()))
                except Exception:
                    pass
        with fdguard.held():
            was_ours = self._fd >= 0 and _identity(self._fd) == self._identity
            spill_ours = self._spill is not None and _identity(self._spill) == self._spill_identity
            self.closed = True
            for fd in (self._fd if was_ours else None, self._spill if spill_ours else None):
                if fd is not None:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
            self._spill = None

    def _send_last(self, line: bytes) -> None:
        """The closing note: to the spill file if one is in use, else one try at the pipe."""
        try:
            with fdguard.held():
                self._send_last_now(line)
        except OSError:
            pass

    def _send_last_now(self, line: bytes) -> None:
        if self._spill is not None and self.spilling:
            if _identity(self._spill) == self._spill_identity:
                os.write(self._spill, line)
        elif not self.closed and not self._pending and self._fd >= 0 and _identity(self._fd) == self._identity:
            if os.write(self._fd, line) < len(line) and self._start_spill("the pipe was full at exit"):
                os.write(self._spill, b"\n" + line)  # the pipe's part ends as a bad line

    def take_note(self) -> ByeFields | None:
        """What went wrong with the channel so far, for the last event (or None)."""
        if not self.dropped:
            return None  # spilled lines reach the parent: nothing is missing
        return {"dropped": self.dropped, "spilled": self.spilling,
                "reason": self.lost_reason or self.spill_reason}


def os_threads() -> int | None:
    """The process's OS threads (``num_threads`` of ``/proc/self/stat``, Linux), or None.

    Every thread counts, not only Python's: OpenMP's pool, CUDA's, a C library's. The
    file is opened under the descriptor lock (the script's ``os.closerange`` waits)."""
    try:
        with fdguard.held(), open("/proc/self/stat", "rb") as fh:
            data = fh.read()
        # after the command name (in parentheses, may hold spaces): field 3 on, num_threads is 20
        return int(data[data.rindex(b")") + 2:].split()[17])
    except (OSError, ValueError, IndexError):
        return None


_FLAG: list[Any] = []
"""glibc's ``__libc_single_threaded`` as a ctypes char once looked up (None: not there)."""


def single_threaded() -> bool:
    """No second thread ever ran in this process, as glibc's malloc sees it (Linux).

    glibc 2.32+ exports the flag its malloc and libstdc++ test (``__libc_single_threaded``):
    cleared at the first ``pthread_create``, never set again, even after that thread ended.
    Read through ctypes (30 ns) it is exactly what a thread of ours would cost; where it is
    missing (musl, an older glibc) the OS thread count (:func:`os_threads`) stands in."""
    if not _FLAG:
        _FLAG.append(_single_threaded_flag())
    flag = _FLAG[0]
    if flag is None:
        return os_threads() == 1
    return bool(flag.value != b"\x00")


def _single_threaded_flag() -> Any:
    try:
        import ctypes

        return ctypes.c_char.in_dll(ctypes.CDLL(None), "__libc_single_threaded")
    except (ImportError, OSError, ValueError, AttributeError):
        return None


def threaded_because() -> str:
    """Why the channel needs its thread from the start, or "" for inline wakes (Linux, a
    process of one OS thread, ``MPSPROF_CHANNEL_THREAD=0``).

    Inline wakes are opt-in for now: measured side by side on a quiet machine they did not
    make a profiled single-threaded loop faster (benchmarks/RESULTS.md, session 57: +0.6%
    and -1.5% against the threaded probe), and the CI of their first day found three timing
    bugs in them (steps shortened by a wake, a second's gap in the memory samples). The
    thread is the default until a run shows what they save."""
    if os.environ.get(THREADED_ENV, "1") not in ("", "0"):
        return THREADED_ENV
    if not sys.platform.startswith("linux"):
        return sys.platform  # macOS: libmalloc locks whatever the thread count
    if not single_threaded():
        return f"the process has {os_threads()} threads"
    return ""


def _identity(fd: int) -> tuple[int, int] | None:
    try:
        st = os.fstat(fd)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def open_channel(spec: str, spill_dir: str | None = None, interval: float = INTERVAL) -> Channel | None:
    """Open the channel named by ``MPSPROF_CHANNEL``: ``fd:N`` or ``fifo:DIR``.

    ``fifo:DIR`` serves launchers (torchrun) that close inherited descriptors: the parent
    made ``DIR/rank-<LOCAL_RANK>.fifo`` in a private (0700) folder before starting them.
    ``spill_dir`` (``MPSPROF_SPILL``): the parent's private folder for spill files;
    ``interval``: seconds between flushes (:data:`INTERVAL`, :data:`HEADLESS_INTERVAL`).
    """
    kind, _, value = spec.partition(":")
    rank = os.environ.get("LOCAL_RANK", "0")
    spill = os.path.join(spill_dir, f"spill-{rank}-{os.getpid()}.jsonl") if spill_dir else None
    if kind == "fd":
        return Channel(int(value), interval, spill_path=spill)
    if kind == "fifo":
        path = os.path.join(value, f"rank-{rank}.fifo")
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        return Channel(fd, interval, spill_path=spill)
    return None
