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

EVENTS_FILE = "events.jsonl"
SUMMARY_FILE = "summary.json"
OUTPUT_FILE = "output.log"


class Recorder:
    def __init__(self, run_dir: Path | None, flush_every: float = 1.0) -> None:
        self.run_dir = run_dir
        self.error: str | None = None
        self._file: IO[bytes] | None = None
        self._flush_every = flush_every
        self._last_flush = time.monotonic()
        if run_dir is not None:
            try:
                # private to the user, like the run directory (0700) it lives in
                fd = os.open(run_dir / EVENTS_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                self._file = os.fdopen(fd, "ab")
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
    """``./mpsprof-runs/<YYYYmmdd-HHMMSS>-<script stem>``, made unique if it exists."""
    stem = Path(script).stem or "run"
    stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in stem)[:60]
    root = base if base is not None else Path.cwd() / "mpsprof-runs"
    name = time.strftime("%Y%m%d-%H%M%S") + "-" + stem
    path = root / name
    n = 1
    while path.exists():
        n += 1
        path = root / f"{name}-{n}"
    return path


def prepare_run_dir(path: Path) -> tuple[Path | None, str | None]:
    """Create the run directory privately (0700); on failure say why and record nothing."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        probe_file = path / ".write-test"
        probe_file.write_bytes(b"")
        probe_file.unlink()
        return path, None
    except OSError as exc:
        return None, f"cannot write the run directory {path}: {exc.strerror or exc}"
