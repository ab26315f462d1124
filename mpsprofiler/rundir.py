"""The run directory and every file mpsprof writes into it.

A run directory holds one run, never two: a directory given with ``-o`` must be new or
empty (a non-empty one is refused before the script starts), and a default name
(``./mpsprof-runs/<time>-<script>``) is claimed by creating it, so two runs started in the
same second get two directories.

Files are never opened through a name someone else may have planted: new files are
created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` (a pre-existing file or symlink makes the
open fail instead of appending to, or truncating, whatever it points at), and rewritten
files (``summary.json``, exported reports) are written to a fresh private temporary file
and renamed over the name; a rename replaces a symlink, it never writes through it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import IO

EVENTS_FILE = "events.jsonl"
"""The event stream, appended as it arrives (flushed every second)."""
SUMMARY_FILE = "summary.json"
"""Figures and findings, written once the run ends."""
OUTPUT_FILE = "output.log"
"""The script's output (TUI mode)."""

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class RunDirInUse(Exception):
    """``-o DIR`` names something that is not a new or empty directory of the user."""


def create_run_dir(path: Path, unique: bool = False) -> Path:
    """Create the run directory (0700) and return it; raises OSError or :class:`RunDirInUse`.

    ``unique``: the name was made up by mpsprof, so on a collision try ``NAME-2``,
    ``NAME-3`` ... (``mkdir`` is the claim: exactly one run wins each name). Otherwise an
    existing directory is accepted only when it is empty and the user's own."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    candidate = path
    for n in range(2, 10_000):
        try:
            candidate.mkdir(mode=0o700)
            return candidate
        except FileExistsError:
            if not unique:
                _check_reusable(candidate)
                return candidate
        candidate = path.with_name(f"{path.name}-{n}")
    raise FileExistsError(f"no free run directory name next to {path}")


def _check_reusable(path: Path) -> None:
    """An existing ``-o`` directory: only an empty directory of the user's own."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise RunDirInUse(f"cannot use {path} as the run directory: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise RunDirInUse(f"{path} exists and is not a directory; choose a new run directory with -o")
    if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        raise RunDirInUse(f"{path} belongs to another user; choose a new run directory with -o")
    try:
        entries = os.listdir(path)
    except OSError as exc:
        raise RunDirInUse(f"cannot use {path} as the run directory: {exc.strerror or exc}") from None
    if entries:
        what = "an earlier mpsprof run" if "events.jsonl" in entries else f"{len(entries)} file(s)"
        raise RunDirInUse(
            f"the run directory {path} already holds {what}; a run directory holds one run. "
            "Choose a new directory with -o (or leave -o out for a fresh ./mpsprof-runs/<time>-<script>)"
        )


def open_new(path: Path, append: bool = False) -> IO[bytes]:
    """A new private (0600) file for writing; fails if anything (a file, a symlink) has the
    name already. ``append`` opens it with ``O_APPEND`` (a log others may also append to)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | CLOEXEC | (os.O_APPEND if append else 0)
    fd = os.open(path, flags, 0o600)
    try:
        return os.fdopen(fd, "ab" if append else "wb")
    except Exception:
        os.close(fd)
        raise


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: written to a new private temporary file in the same
    directory, then renamed over ``path``. A reader never sees half a file, and a symlink
    at ``path`` is replaced, not followed. Raises OSError."""
    path = Path(path)
    for _attempt in range(100):
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
        try:
            fh = open_new(tmp)
            break
        except FileExistsError:
            continue
    else:  # pragma: no cover - 100 random names taken
        raise FileExistsError(f"cannot create a temporary file next to {path}")
    try:
        with fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_text_atomic(path: Path, text: str) -> str | None:
    """:func:`write_atomic` of UTF-8 text; returns an error message instead of raising."""
    try:
        write_atomic(path, text.encode("utf-8", "replace"))
    except OSError as exc:
        return f"cannot write {path}: {exc.strerror or exc}"
    return None


def check_writable(path: Path) -> None:
    """Create and remove a private file with a fresh name: raises OSError if the directory
    cannot take files (read-only, full, not ours)."""
    name = Path(path) / f".mpsprof-write-test.{os.getpid()}.{os.urandom(4).hex()}"
    open_new(name).close()
    os.unlink(name)


def print_or_write(text: str, output: str | Path | None) -> str | None:
    """A command's rendered output: to stdout when ``output`` is None, else written safely
    (:func:`write_text_atomic`) and said on stderr. Returns the error text, or None."""
    import sys

    if output is None:
        sys.stdout.write(text)
        return None
    error = write_text_atomic(Path(output), text)
    if not error:
        sys.stderr.write(f"mpsprof: wrote {output}\n")
    return error
