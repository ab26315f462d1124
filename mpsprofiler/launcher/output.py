"""The script's stdout and stderr in TUI mode: a pipe that mpsprof relays to
``RUN_DIR/output.log`` and to the live view.

The script writes to a pipe, never to our file: a full disk (ENOSPC), a quota or a file
size limit then costs the copy in ``output.log`` and nothing else: the relay says so once,
the script's prints keep succeeding and the view keeps showing them. A dedicated thread
does nothing but read the pipe, so the script is not slowed by the UI; the pipe holds
1 MiB where the system allows (Linux), and the view takes the newest bytes of a flood.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO

from ..redact import StreamScrubber

PIPE_SIZE = 1 << 20
VIEW_LIMIT = 1 << 20
"""Bytes kept for the view between two reads: a flood shows its end, not every byte."""
RECENT = 8 << 10


class OutputRelay:
    def __init__(self, path: Path, file: IO[bytes], secrets: Iterable[str] = ()) -> None:
        """``file``: ``path`` opened for appending (the relay owns and closes it);
        ``secrets``: values masked as ``***`` in ``output.log`` and the view (the script's
        ``--api-key`` ...: see redact.py); an echo to the real terminal shows the output
        as the script wrote it, as headless mode does."""
        self.path = path
        self._scrubber = StreamScrubber(secrets)
        self.error: str | None = None
        """Why the copy in output.log stopped (said once), or None."""
        self.on_error: Callable[[str], object] | None = None
        """Called once, on the relay thread, with :attr:`error`."""
        self.echo = False
        """Also write the output to our own stdout (the view is gone, the script is not)."""
        self._lock = threading.Lock()
        self._pending = bytearray()
        self._recent = bytearray()
        self._skipped = 0
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self._file: IO[bytes] | None = file
        try:
            self.read_fd, self.write_fd = os.pipe()
        except OSError:
            self._close_file()
            raise
        _grow_pipe(self.write_fd)

    def start(self) -> None:
        """After the child has its copy of :attr:`write_fd` (ours is closed here)."""
        os.close(self.write_fd)
        self._thread = threading.Thread(target=self._relay, name="mpsprof-output", daemon=True)
        self._thread.start()

    def close_unstarted(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        self._close_file()
        self._closed.set()

    def _relay(self) -> None:
        try:
            while True:
                try:
                    data = os.read(self.read_fd, 1 << 16)
                except InterruptedError:
                    continue
                except OSError:
                    break
                if not data:
                    self._keep(self._scrubber.flush())
                    break
                self._keep(self._scrubber.feed(data))
                with self._lock:
                    echo = self.echo
                if echo:  # the real stdout: the app may have replaced sys.stdout meanwhile
                    try:
                        out = sys.__stdout__
                        if out is None:  # no stdout at all (pythonw): nothing to echo on
                            raise AttributeError("no stdout")
                        out.buffer.write(data)
                        out.flush()
                    except Exception:  # noqa: BLE001 - this thread must keep reading, whatever happens
                        pass
        finally:
            try:
                os.close(self.read_fd)
            except OSError:
                pass
            self._close_file()
            self._closed.set()

    def _keep(self, data: bytes) -> None:
        """Scrubbed output: into output.log, and for the view."""
        if not data:
            return
        try:
            self._copy(data)
        except Exception:  # noqa: BLE001 - never stop reading: the script would block
            pass
        with self._lock:
            self._pending += data
            if len(self._pending) > VIEW_LIMIT:
                cut = len(self._pending) - VIEW_LIMIT
                del self._pending[:cut]
                self._skipped += cut
            self._recent += data
            del self._recent[: max(0, len(self._recent) - RECENT)]

    def _copy(self, data: bytes) -> None:
        if self._file is None:
            return
        try:
            self._file.write(data)
            self._file.flush()  # the file is the record: nothing waits in our buffer
        except OSError as exc:
            self.error = f"output.log is no longer written: {exc.strerror or exc} ({self.path}); the script's output still shows here"
            self._close_file()
            if self.on_error is not None:
                try:
                    self.on_error(self.error)
                except Exception:  # noqa: BLE001 - the relay must keep reading
                    pass

    def _close_file(self) -> None:
        fh, self._file = self._file, None
        if fh is not None:
            try:
                fh.close()
            except OSError:
                pass

    # -- the view's side --------------------------------------------------------------
    def take(self) -> tuple[bytes, int]:
        """What arrived since the last call, and how many bytes of it were dropped."""
        with self._lock:
            data, skipped = bytes(self._pending), self._skipped
            self._pending.clear()
            self._skipped = 0
        return data, skipped

    def start_echo(self) -> bytes:
        """Echo from now on; returns the last bytes read before (up to 8 KiB), to show
        what led up to this moment."""
        with self._lock:
            self.echo = True
            return bytes(self._recent)

    @property
    def finished(self) -> bool:
        """The pipe reached EOF (the script and its children closed it) and all was read."""
        return self._closed.is_set()

    def wait(self, timeout: float) -> bool:
        return self._closed.wait(timeout)


def _grow_pipe(fd: int) -> None:
    """Room for 1 MiB of output before a slow reader could block the script (Linux)."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_SIZE)
    except (ImportError, OSError):
        pass
