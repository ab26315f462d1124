"""Keep the probe's file descriptors and the script's apart.

The probe's threads open files (``/proc`` readings in the memory sampler, the event
channel's pipe and spill file). Daemonizing code in the script closes every descriptor
it did not open (``os.closerange(3, ...)``) and then opens files of its own, which take
the numbers just freed. Without care, a sampler thread that opened ``/proc/.../statm``
as descriptor 7 just before the script's ``closerange`` would close descriptor 7 when it
is done, and 7 is by then the script's own log file: the script's next write fails with
``EBADF``. (Seen in CI: ``tests/scripts/closes_fds.py`` crashed under mpsprof.)

Two measures, both cheap:

* :func:`held` is one process-wide re-entrant lock. The probe holds it while it has a
  descriptor open for a moment (a sample, a write to the channel), and the script's
  ``os.close``, ``os.closerange`` and ``os.dup2`` take it too (:func:`install` wraps
  them), so the script can only close a number while none of the probe's short-lived
  descriptors is in use, and the probe's own close can only close its own file.
* :func:`own` registers a descriptor the probe keeps open (the run-queue clock); the
  wrapped calls forget any registered number they close or replace, and
  :func:`still_ours` says so before the probe reads or closes it again.

Closes done in C (an extension closing a descriptor) cannot be seen here; the channel
also compares device and inode before each write (:mod:`.channel`) for those.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

GIVE_UP_S = 2.0
"""How long the script's ``os.close`` waits for the lock before it closes without it. The
probe holds the lock for a read or a write of a few milliseconds; a lock held longer was
left held by a thread that is gone (a daemon thread stopped by the interpreter's shutdown
in the middle of a sample): the script's close must never wait on it forever."""

_lock = threading.RLock()
_owned: set[int] = set()
_installed: list[tuple[str, Any]] = []
_fork_hook = False


def held() -> Any:
    """The lock (a context manager) to hold while a probe descriptor is open."""
    return _lock


def owned_here() -> bool:
    """This thread holds the lock (a probe read, or the script's close waiting on it)."""
    is_owned: Callable[[], bool] | None = getattr(_lock, "_is_owned", None)
    return bool(is_owned()) if is_owned is not None else False


def own(fd: int) -> None:
    """Register a descriptor the probe keeps open across calls."""
    with _lock:
        _owned.add(fd)


def disown(fd: int) -> None:
    with _lock:
        _owned.discard(fd)


def still_ours(fd: int) -> bool:
    """False once the script closed or replaced ``fd`` (through ``os``)."""
    return fd in _owned


@contextlib.contextmanager
def _script_side() -> Iterator[None]:
    """The lock, as the script's close, closerange and dup2 take it: never at the
    interpreter's shutdown, never for more than :data:`GIVE_UP_S`.

    At shutdown the probe's channel thread (a daemon) is stopped wherever it is, also
    inside a sample that holds the lock, and the lock stays held for good; objects freed
    after that close descriptors in their ``__del__`` (a DataLoader iterator shutting its
    workers down, from the traceback of the crash that ended the script): a wait there hung
    the process instead of letting it exit with the crash's status."""
    if sys.is_finalizing():
        yield
        return
    got = _lock.acquire(timeout=GIVE_UP_S)
    try:
        yield
    finally:
        if got:
            _lock.release()


def _forget(first: int, stop: int) -> None:
    for fd in [fd for fd in tuple(_owned) if first <= fd < stop]:  # (a snapshot: see _script_side)
        _owned.discard(fd)


def _close(real: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(real)
    def close(fd: Any) -> Any:
        with _script_side():
            try:
                _forget(int(fd), int(fd) + 1)
            except (TypeError, ValueError, OverflowError):
                pass  # let the real call raise what python raises
            return real(fd)
    return close


def _closerange(real: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(real)
    def closerange(fd_low: Any, fd_high: Any) -> Any:
        with _script_side():
            try:
                _forget(int(fd_low), int(fd_high))
            except (TypeError, ValueError, OverflowError):
                pass
            return real(fd_low, fd_high)
    return closerange


def _dup2(real: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(real)
    def dup2(fd: Any, fd2: Any, *args: Any, **kwargs: Any) -> Any:
        with _script_side():
            try:
                _forget(int(fd2), int(fd2) + 1)
            except (TypeError, ValueError, OverflowError):
                pass
            return real(fd, fd2, *args, **kwargs)
    return dup2


def _after_fork_in_child() -> None:
    # a probe thread may have held the lock at fork(): the child's copy would stay held
    # and its first os.close (multiprocessing calls it right away) would wait forever
    global _lock
    _lock = threading.RLock()


def install() -> Callable[[], None]:
    """Wrap ``os.close``, ``os.closerange`` and ``os.dup2``; returns the undo."""
    if _installed:
        return uninstall
    for name, wrap in (("close", _close), ("closerange", _closerange), ("dup2", _dup2)):
        real = getattr(os, name, None)
        if real is None:
            continue
        _installed.append((name, real))
        setattr(os, name, wrap(real))
    global _fork_hook
    if not _fork_hook:
        _fork_hook = True
        try:
            os.register_at_fork(after_in_child=_after_fork_in_child)
        except Exception:
            pass
    return uninstall


def uninstall() -> None:
    while _installed:
        name, real = _installed.pop()
        setattr(os, name, real)
