"""The probe's side of the private event channel.

The training thread only appends encoded lines to a bounded in-memory buffer; a daemon
thread writes them to the inherited pipe with a non-blocking fd. Whatever happens to the
parent (stopped, killed, slow), a write never blocks the training and never raises into
it: a dead reader switches the channel off, a full buffer drops events and counts them.
If the script closes the descriptor and its number is reused for one of the script's
own files, the channel notices (device and inode changed) and stops instead of writing
into that file.
"""

from __future__ import annotations

import os
import select
import threading
import time
from collections import deque
from typing import Callable

MAX_BUFFERED_BYTES = 16 * 1024 * 1024
"""Past this the parent is not reading: drop rather than grow the training's memory."""


class Channel:
    """Buffered, non-blocking writer of event lines to a file descriptor."""

    def __init__(self, fd: int, interval: float = 0.25) -> None:
        self._fd = fd
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
        self._identity = _identity(fd)
        try:
            os.set_inheritable(fd, False)
            os.set_blocking(fd, False)
        except OSError:
            pass
        self._thread = threading.Thread(target=self._run, name="mpsprof-channel", daemon=True)
        self._thread.start()

    def on_flush(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` (e.g. drain pending step batches) before each periodic flush."""
        self._before_flush.append(fn)

    def send(self, line: bytes) -> None:
        if self.closed:
            return
        if self._buffered + len(line) > MAX_BUFFERED_BYTES:
            self.dropped += 1
            return
        self._buf.append(line)
        self._buffered += len(line)

    def _run(self) -> None:
        while not self._stop:
            self._wake.wait(self._interval)
            self._wake.clear()
            self._flush_once()

    def _flush_once(self) -> bool:
        """Write what can be written now; True when everything went out."""
        with self._lock:
            for fn in self._before_flush:
                try:
                    fn()
                except Exception:
                    pass
            while self._buf:
                line = self._buf.popleft()
                self._buffered -= len(line)
                self._pending += line
                if len(self._pending) >= 1 << 16:
                    break
            if not self._pending or self.closed:
                return not self._buf
            if _identity(self._fd) != self._identity:
                # the script closed our descriptor (os.closerange) and the number now
                # names one of its own files: never write there
                self.closed = True
                self._buf.clear()
                self._pending = b""
                self._fd = -1
                return True
            try:
                written = os.write(self._fd, self._pending)
                self._pending = self._pending[written:]
            except BlockingIOError:
                pass
            except OSError:
                # EPIPE: the parent is gone. Anything else: the channel is unusable.
                self.closed = True
                self._buf.clear()
                self._pending = b""
            return not self._pending and not self._buf

    def close(self, timeout: float = 3.0) -> None:
        """Flush what is buffered (waiting for the reader up to ``timeout``) and close."""
        if self.closed:
            return
        self._stop = True
        self._wake.set()
        self._thread.join(timeout=1.0)
        deadline = time.monotonic() + timeout
        while not self.closed and time.monotonic() < deadline:
            if self._flush_once():
                break
            try:
                select.select([], [self._fd], [], 0.05)
            except (OSError, ValueError):
                break
        was_ours = _identity(self._fd) == self._identity
        self.closed = True
        if was_ours:
            try:
                os.close(self._fd)
            except OSError:
                pass


def _identity(fd: int) -> tuple[int, int] | None:
    try:
        st = os.fstat(fd)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def open_channel(spec: str) -> Channel | None:
    """Open the channel named by ``MPSPROF_CHANNEL``: ``fd:N`` or ``fifo:DIR``.

    ``fifo:DIR`` serves launchers (torchrun) that close inherited descriptors: the parent
    made ``DIR/rank-<LOCAL_RANK>.fifo`` in a private (0700) folder before starting them.
    """
    kind, _, value = spec.partition(":")
    if kind == "fd":
        return Channel(int(value))
    if kind == "fifo":
        rank = os.environ.get("LOCAL_RANK", "0")
        path = os.path.join(value, f"rank-{rank}.fifo")
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        return Channel(fd)
    return None
