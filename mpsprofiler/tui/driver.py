"""The terminal driver of the app, made safe for a terminal that goes away.

Textual's Linux driver writes the screen from a thread fed by a queue of 30 writes. When
the terminal closes (a tmux pane killed, an ssh link dropped), the next write fails with
``EIO``, the thread dies of it, and 30 frames later the app blocks for good on the full
queue: the event loop stops, so SIGHUP / SIGTERM (handled on the loop) are never acted
on and only SIGKILL ends mpsprof, leaving the script running and its summary unwritten.

:class:`SafeLinuxDriver` gives the writer a file that drops what it cannot write, and
treats the first failed write as a hangup (a terminal that vanished without sending
SIGHUP, e.g. when mpsprof was not its controlling process): the app then ends the run as
for SIGHUP. See textual's ``drivers/_writer_thread.py`` and ``drivers/linux_driver.py``.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import IO, Any

from textual.drivers.linux_driver import LinuxDriver
from textual.message import Message


class TerminalFile:
    """A file-like for the screen writer that never raises: once a write or flush fails,
    it drops everything after and calls ``on_gone`` once."""

    def __init__(self, file: IO[str], on_gone: Any) -> None:
        self._file = file
        self._on_gone = on_gone
        self._lock = threading.Lock()
        self.gone = False

    def _failed(self) -> None:
        with self._lock:
            first, self.gone = not self.gone, True
        if first:
            self._on_gone()

    def write(self, text: str) -> int:
        if self.gone:
            return len(text)
        try:
            return self._file.write(text)
        except (OSError, ValueError):  # EIO: the terminal is gone; ValueError: stderr closed
            self._failed()
            return len(text)

    def flush(self) -> None:
        if self.gone:
            return
        try:
            self._file.flush()
        except (OSError, ValueError):
            self._failed()

    def __getattr__(self, name: str) -> Any:  # fileno(), isatty() ... of the real file
        return getattr(self._file, name)


class TerminalGone(Message):
    """The terminal went away while SIGHUP is ignored (``nohup``, ``trap '' HUP``): the
    script goes on, as under python; the app leaves once it has ended."""


def hang_up(app: Any = None) -> None:
    """The terminal went away: as if it had sent SIGHUP (the app's handler ends the run).
    With SIGHUP ignored since mpsprof started, no signal (the script ignores it as under
    python, and the app would never hear it): the app is told instead. Called on the
    writer thread: ``post_message`` is thread-safe and never blocks."""
    if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN and app is not None:
        app.post_message(TerminalGone())
        return
    os.kill(os.getpid(), signal.SIGHUP)


class SafeLinuxDriver(LinuxDriver):
    """Textual's Linux driver whose screen writes survive a closed terminal."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self._file is not None:
            app = self._app
            self._file = TerminalFile(self._file, lambda: hang_up(app))  # type: ignore[assignment]  # duck-typed file
