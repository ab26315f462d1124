"""The run recording: ``RUN_DIR/events.jsonl``, written by the parent.

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

from ..rundir import EVENTS_FILE, OUTPUT_FILE, SUMMARY_FILE, RunDirInUse, check_writable, create_run_dir, open_new

__all__ = [
    "EVENTS_FILE", "OUTPUT_FILE", "SUMMARY_FILE",  # re-exported: the run directory owns them
    "Recorder", "RunDirInUse", "default_run_dir", "prepare_run_dir",
]


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


def default_run_dir(script: str, base: Path | None = None) -> Path:
    """``./mpsprof-runs/<YYYYmmdd-HHMMSS>-<script stem>``: a candidate name, made unique when
    :func:`prepare_run_dir` claims it (``unique=True``)."""
    stem = Path(script).stem or "run"
    stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in stem)[:60]
    root = base if base is not None else Path.cwd() / "mpsprof-runs"
    return root / (time.strftime("%Y%m%d-%H%M%S") + "-" + stem)


def prepare_run_dir(path: Path, unique: bool = False) -> tuple[Path | None, str | None]:
    """Create the run directory privately (0700); on failure say why and record nothing.

    Raises :class:`RunDirInUse` for a directory that already holds files (``-o`` of an
    earlier run): that is the user's mistake to fix, not a reason to mix two runs."""
    try:
        created = create_run_dir(path, unique=unique)
        check_writable(created)
        return created, None
    except OSError as exc:
        return None, f"cannot write the run directory {path}: {exc.strerror or exc}"
