"""The run directory and every file mpsprof writes into it: the one owner of its layout.

Every name inside a run directory is spelt here and nowhere else: the event stream, the
summary, the script's output, the experiments ``mpsprof try`` stored, the fix files. So is
the default name (``./mpsprof-runs/<time>-<script>``) and how a directory is claimed; the
launcher, the session's loader, ``try`` and the views ask this module.

A run directory holds one run, never two: a directory given with ``-o`` must be new or
empty (a non-empty one is refused before the script starts), and a default name
(``./mpsprof-runs/<time>-<script>``) is claimed by creating it, so two runs started in the
same second get two directories.

Files are never opened through a name someone else may have planted: new files are
created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` (a pre-existing file or symlink makes the
open fail instead of appending to, or truncating, whatever it points at), and rewritten
files (``summary.json``, exported reports) are written to a fresh private temporary file
and renamed over the name; a rename replaces a symlink, it never writes through it.

Output the user names (``report -o``, ``compare -o``, ``run --report``) is different: a
device, a FIFO or a symlink such as ``/dev/stdout`` at that path is what the user wants
written to, so it is written through (:func:`write_output`); only a regular file (or a new
name) is replaced atomically.

Every file mpsprof reads goes through :func:`open_regular` / :func:`read_regular`: regular
files only (a FIFO blocks forever, ``/dev/zero`` never ends), a size bound, and a symlink
policy (files inside a run directory are never read through a symlink).
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, BinaryIO

EVENTS_FILE = "events.jsonl"
"""The event stream, appended as it arrives (flushed every second)."""
SUMMARY_FILE = "summary.json"
"""Figures and findings, written once the run ends."""
OUTPUT_FILE = "output.log"
"""The script's output (TUI mode)."""
EXPERIMENTS_FILE = "experiments.json"
"""The results of ``mpsprof try`` (and ``t`` in the TUI), newest last."""
EXPERIMENTS_DIR = "experiments"
"""Each experiment's own runs: ``experiments/<n>-<label>/``."""
REPORT_FILES = ("report.md", "report.html")
"""The reports ``e`` in the TUI writes into the run directory."""
DEFAULT_ROOT = "mpsprof-runs"
"""Where runs go when ``-o`` is not given: ``./mpsprof-runs/<time>-<script>``."""

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
        what = "an earlier mpsprof run" if EVENTS_FILE in entries else f"{len(entries)} file(s)"
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
    return _text_error(write_atomic, path, text)


def _text_error(write: Callable[[Path, bytes], None], path: Path, text: str) -> str | None:
    """``write`` of UTF-8 text, an OSError turned into the message the commands print."""
    try:
        write(path, text.encode("utf-8", "replace"))
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
    if output is None:
        return write_stdout(text)
    error = write_output_text(Path(output), text)
    if not error:
        sys.stderr.write(f"mpsprof: wrote {output}\n")
    return error


def write_stdout(text: str) -> str | None:
    """``text`` to standard output, flushed; a full disk (``> /dev/full``) or a reader gone
    (``| head -1``) is an error message, not a traceback. After a failure stdout is pointed
    at /dev/null, so Python's own flush at exit does not fail (and print) a second time."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as exc:
        _stdout_to_devnull()
        return f"cannot write to standard output: {exc.strerror or exc}"
    return None


def _stdout_to_devnull() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def write_output(path: Path, data: bytes) -> None:
    """Write a file the user named: a regular file (or a new name) is replaced atomically
    (:func:`write_atomic`); a FIFO or a device at the path is opened and written through,
    as the shell's ``>`` does, so the node stays what it is and the bytes reach its reader.

    A symlink is written through when it leads to such a node (``-o link-to-a-fifo``), or
    when it is one of the system's links to a descriptor (root's, in ``/dev`` or ``/proc``:
    ``/dev/stdout``, ``/dev/fd/1``, whatever stdout is). Any other symlink to a regular
    file, or a dangling one, is replaced like a regular file: a link planted in a run
    directory must never get a file elsewhere overwritten. A link of another user (not
    root's) is refused. Raises OSError."""
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is None or stat.S_ISREG(st.st_mode):
        write_atomic(path, data)
        return
    if stat.S_ISLNK(st.st_mode):
        system = st.st_uid == 0 and os.path.abspath(path).startswith(("/dev/", "/proc/"))
        if not system and hasattr(os, "geteuid") and st.st_uid not in (0, os.geteuid()):
            raise PermissionError(errno.EPERM, "a symbolic link of another user; not followed", str(path))
        try:
            target: os.stat_result | None = os.stat(path)
        except OSError:
            target = None  # dangling or a loop
        if target is None or (stat.S_ISREG(target.st_mode) and not system):
            write_atomic(path, data)
            return
        st = target
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC | CLOEXEC)  # no O_CREAT: the node exists
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def write_output_text(path: Path, text: str) -> str | None:
    """:func:`write_output` of UTF-8 text; returns an error message instead of raising."""
    return _text_error(write_output, path, text)


# -- reading ---------------------------------------------------------------------------------
MAX_READ_BYTES = 64 << 20
"""The default bound of :func:`read_regular`: no JSON file mpsprof writes comes near it."""


def open_regular(path: Path, *, follow: bool = True) -> BinaryIO:
    """Open a file for reading only if it is a regular file: a FIFO would block forever
    (it is opened non-blocking, so the open itself cannot wait for a writer) and a device
    (``/dev/zero``) never ends. ``follow=False``: a symlink at ``path`` is refused (files
    inside a run directory, where a planted link could point anywhere). Raises OSError."""
    flags = os.O_RDONLY | os.O_NONBLOCK | CLOEXEC | (0 if follow else NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if not follow and exc.errno in (errno.ELOOP, errno.EMLINK):
            raise OSError(errno.ELOOP, "a symbolic link; not followed inside a run directory", str(path)) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a pipe, a device or a folder)", str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: Path, limit: int = MAX_READ_BYTES, *, follow: bool = True) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (:func:`open_regular`); a
    larger file is refused unread. Raises OSError."""
    with open_regular(path, follow=follow) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit // 1024} KiB; not read", str(path))
    return data


def real_path(path: Path) -> Path:
    """``path.resolve()`` that never raises: a symlink loop (``resolve`` raises RuntimeError
    on Python 3.11) or an unreadable path is its absolute name; opening it says why."""
    try:
        return Path(path).resolve()
    except (OSError, RuntimeError):
        return Path(path).absolute()


# -- layout ----------------------------------------------------------------------------------
def is_run_dir(path: Path) -> bool:
    """A directory holding a recording (its ``events.jsonl``); never raises."""
    try:
        return Path(path).is_dir() and (Path(path) / EVENTS_FILE).is_file()
    except OSError:
        return False


def default_run_dir(script: str, base: Path | None = None) -> Path:
    """``./mpsprof-runs/<YYYYmmdd-HHMMSS>-<script stem>``: a candidate name, made unique when
    :func:`prepare_run_dir` claims it (``unique=True``)."""
    import time

    stem = Path(script).stem or "run"
    stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in stem)[:60]
    root = base if base is not None else Path.cwd() / DEFAULT_ROOT
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


def fix_file(run_dir: Path, rule: str, suffix: str = ".txt") -> Path:
    """``RUN_DIR/fix-<rule><suffix>`` (the copied fix ``.txt``, a patch ``.patch``; the rule
    id kept to safe file-name characters)."""
    import re

    return Path(run_dir) / f"fix-{re.sub(r'[^A-Za-z0-9_.-]', '_', rule)[:80] or 'finding'}{suffix}"


MAX_EXPERIMENTS = 100
MAX_EXPERIMENTS_BYTES = 16 << 20
"""100 results of a few KB each: a larger ``experiments.json`` is not ours and is not read."""


def read_experiments(run_dir: Path | None) -> list[dict[str, Any]]:
    """The stored ``try`` results, newest last; [] when there are none or the file is
    unreadable (a FIFO, ``/dev/zero`` or a symlink planted as ``experiments.json`` is
    refused, not read)."""
    import json

    if run_dir is None:
        return []
    try:
        data = json.loads(read_regular(Path(run_dir) / EXPERIMENTS_FILE, MAX_EXPERIMENTS_BYTES, follow=False))
    except (OSError, ValueError, RecursionError):
        return []
    items = data.get("experiments") if isinstance(data, dict) else None
    return [d for d in items if isinstance(d, dict)] if isinstance(items, list) else []


def append_experiment(run_dir: Path, result: dict[str, Any]) -> str | None:
    """Append one result to ``experiments.json`` (atomically; the newest 100 kept); returns
    an error message instead of raising."""
    import json

    items = read_experiments(run_dir) + [result]
    text = json.dumps({"schema": 1, "experiments": items[-MAX_EXPERIMENTS:]}, indent=2, default=str)
    return write_text_atomic(Path(run_dir) / EXPERIMENTS_FILE, text)
