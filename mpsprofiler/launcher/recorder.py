"""The run recording: ``RUN_DIR/events.jsonl``, written by the parent (the name and the
directory are :mod:`mpsprofiler.rundir`'s).

Lines are written as received and flushed at least once a second, so a crash of either
process leaves a recording readable up to its last flush. A write error (full disk, a
directory that became unwritable) stops the recording with one clear message; the
training is never affected.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import IO

from ..rundir import EVENTS_FILE, open_new


class Recorder:
    def __init__(self, run_dir: Path | None, flush_every: float = 1.0) -> None:
        self.run_dir = run_dir
        self.error: str | None = None
        self._file: IO[bytes] | None = None
        self._flush_every = flush_every
        self._last_flush = time.monotonic()
        if run_dir is not None:
            try:
                # a new private file: never appends to an old run's events or through a symlink
                self._file = open_new(run_dir / EVENTS_FILE, append=True)
            except OSError as exc:
                self._fail(exc)

    @property
    def active(self) -> bool:
        return self._file is not None

    def _fail(self, exc: OSError) -> None:
        self.error = f"recording stopped: {exc.strerror or exc} ({self.run_dir})"
        sys.stderr.write(f"mpsprof: {self.error}; the training continues\n")
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass
        self._file = None

    def write(self, line: bytes) -> None:
        if self._file is None:
            return
        try:
            self._file.write(line if line.endswith(b"\n") else line + b"\n")
            self.maybe_flush()
        except OSError as exc:
            self._fail(exc)

    def maybe_flush(self) -> None:
        if self._file is None:
            return
        now = time.monotonic()
        if now - self._last_flush >= self._flush_every:
            self.flush()

    def flush(self) -> None:
        if self._file is None:
            return
        try:
            self._file.flush()
            self._last_flush = time.monotonic()
        except OSError as exc:
            self._fail(exc)

    def close(self) -> None:
        if self._file is None:
            return
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError:
            pass
        try:
            self._file.close()
        except OSError:
            pass
        self._file = None
