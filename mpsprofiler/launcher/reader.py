"""The parent's end of the probe's channels: read, decode, record and hand on its events.

Split from the run controller (``launcher/child.py``), which starts, signals and waits for
the child; this module only reads what the probe sends: one pipe, or one FIFO per rank
under torchrun, on the reader thread until the child is gone; then the lines the probe
spilled to files (see ``probe/channel.py``). Each decoded event is written to the
recording and handed on in batches; a line that is no event is counted, never raised.
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from .. import events
from .distributed import FifoChannels
from .others import OtherPrograms
from .recorder import Recorder

MAX_LINE_BYTES = 8 * 1024 * 1024
"""A line longer than this is no event of the probe's: dropped (and counted) unread."""
IDLE_WAIT = 0.5
"""Seconds the reader of the one pipe sleeps while no batch waits to be handed on: the
probe writes 2-4 times a second and wakes it then, and the pipe's end (the child's exit)
wakes it at once. Woken every 0.1 s, it took ~10 wakes a second, most for nothing; on a
machine where the training has one core each took the training's core. What else the loop
does waits at most this long: the ``others`` reading (every 2 s), the recording's flush
(``Recorder``: at least every second while lines come, so at most this much later)."""
POLL_WAIT = 0.1
"""Seconds between the loop's turns once the child is gone, and for FIFOs (torchrun), which
never reach their end: the end is told by a quiet spell of 0.3 s."""


class EventReader:
    """Reads the channels of one run; its counts (``bad_lines``, ``bye_seen``...) end up in
    the run's ``exit`` event, written by the controller."""

    def __init__(self, recorder: Recorder, deliver: Callable[[list[events.Event]], None],
                 control: Callable[[events.Event], None], others: OtherPrograms, exited: threading.Event,
                 batch_interval: float) -> None:
        """``deliver`` takes each batch of events; ``control`` the requests to the view
        (``terminal`` events), which are not recorded; ``exited`` is set once the child is gone."""
        self._recorder = recorder
        self._deliver = deliver
        self._control = control
        self._others = others
        self._exited = exited
        self._batch_interval = batch_interval
        self._fds: list[int] = []
        self._fifos: FifoChannels | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._started_at = 0.0
        self._tails: dict[int, bytes] = {}
        self.bad_lines = 0
        self.channel_closed_at: float | None = None
        """Seconds into the run when the event pipe reached its end while the child lived
        (the script closed it): what came later is only in a spill file, if anywhere."""
        self.spilled_lines = 0
        self.bye_seen = False
        self.hello_seen = False

    def open(self, fds: list[int], fifos: FifoChannels | None) -> None:
        """The channels to read: the pipe's read end, or the FIFOs' (``fifos``)."""
        self._fds = list(fds)
        self._fifos = fifos

    def start(self, process: subprocess.Popen[bytes], started_at: float) -> threading.Thread:
        """Read on a new thread until the child is gone; returns the thread."""
        self._process = process
        self._started_at = started_at
        thread = threading.Thread(target=self._read_loop, name="mpsprof-reader", daemon=True)
        thread.start()
        return thread

    def _read_loop(self) -> None:
        """Read every channel (one pipe, or a FIFO per rank) until the child is gone."""
        fds = list(self._fds)
        pending: dict[int, bytes] = {fd: b"" for fd in fds}
        overlong: set[int] = set()
        batch: list[events.Event] = []
        last = time.monotonic()
        exit_deadline: float | None = None
        quiet_since: float | None = None
        try:
            while fds:
                now = time.monotonic()
                if self._exited.is_set() and exit_deadline is None:
                    # a grandchild holding the pipe open must not keep us waiting forever
                    exit_deadline = now + 3.0
                if exit_deadline is not None and now > exit_deadline:
                    break
                ready, _, _ = select.select(fds, [], [], self._wait(batch, now - last))
                if not ready and self._exited.is_set():
                    # FIFOs never reach EOF (we hold a writer): stop once they are quiet
                    quiet_since = quiet_since or now
                    if now - quiet_since > 0.3:
                        break
                for fd in ready:
                    quiet_since = None
                    try:
                        chunk = os.read(fd, 1 << 16)
                    except BlockingIOError:
                        continue
                    if not chunk:
                        fds.remove(fd)
                        if self._fifos is None and not self._exited.is_set() and self._process is not None \
                                and self._process.poll() is None:
                            self.channel_closed_at = time.monotonic() - self._started_at
                        continue
                    if fd in overlong:  # the rest of a line too long to be an event
                        cut = chunk.find(b"\n")
                        if cut < 0:
                            continue
                        overlong.discard(fd)
                        chunk = chunk[cut + 1:]
                    pending[fd] += chunk
                    *lines, pending[fd] = pending[fd].split(b"\n")
                    if len(pending[fd]) > MAX_LINE_BYTES:
                        pending[fd] = b""
                        overlong.add(fd)
                        self.bad_lines += 1
                    self.take_lines(lines, batch)
                others = self._others.take()
                if others is not None:
                    self.take_lines([events.encode(events.KIND_OTHERS, time.monotonic() - self._started_at,
                                                   **others).rstrip(b"\n")], batch)
                now = time.monotonic()
                if batch and (now - last >= self._batch_interval or len(batch) > 2000):
                    self._deliver(batch)
                    batch = []
                    last = now
                self._recorder.maybe_flush()
        finally:
            self._tails = pending
            if batch:
                self._deliver(batch)
            if self._fifos is not None:
                self._fifos.close()
            else:
                for fd in self._fds:
                    try:
                        os.close(fd)
                    except OSError:
                        pass

    def _wait(self, batch: list[events.Event], since_delivery: float) -> float:
        """How long the next ``select`` may sleep: a pending batch is handed on within
        ``batch_interval``, as before; otherwise :data:`IDLE_WAIT` (:data:`POLL_WAIT` once
        the child is gone, or on FIFOs)."""
        if self._fifos is not None or self._exited.is_set():
            return POLL_WAIT
        if batch:
            return min(POLL_WAIT, max(0.0, self._batch_interval - since_delivery))
        return IDLE_WAIT

    def take_lines(self, lines: list[bytes], batch: list[events.Event]) -> None:
        for line in lines:
            if not line.strip():
                continue
            try:
                event, line = events.decode_wire(line)  # (packed steps: the line with columns)
            except ValueError:
                self.bad_lines += 1
                continue
            if event.kind == events.KIND_BYE:
                self.bye_seen = True
            elif event.kind == events.KIND_HELLO:
                self.hello_seen = True
            elif event.kind == events.KIND_TERMINAL:  # a request to the view, not data
                self._control(event)
                continue
            self._recorder.write(line + b"\n")
            batch.append(event)

    def read_spills(self, folder: str | None) -> None:
        """After the pipe: the lines the probe spilled to files in ``folder`` (the parent
        was stopped, or the script closed the pipe), in order after what the pipe carried.
        The one pipe's unfinished last line continues in its spill file. The folder is
        removed."""
        if folder is None:
            return
        try:
            names = sorted(os.listdir(folder))
            batch: list[events.Event] = []
            for name in names:
                path = os.path.join(folder, name)
                with open(path, "rb") as fh:
                    data = fh.read()
                if self._fifos is None and len(names) == 1:
                    data = b"".join(self._tails.values()) + data
                lines = data.split(b"\n")
                self.spilled_lines += len([ln for ln in lines if ln.strip()])
                self.take_lines(lines, batch)
            if batch:
                self._deliver(batch)
        except OSError as exc:
            sys.stderr.write(f"mpsprof: cannot read the probe's spill file: {exc.strerror or exc}\n")
        finally:
            shutil.rmtree(folder, ignore_errors=True)
