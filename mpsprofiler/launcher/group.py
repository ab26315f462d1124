"""A process group of its own for the script, without making it the group's leader
(and the other things the script inherits from the launch: its group's Popen arguments,
the descriptors we were started with).

Headless and away from a terminal (a script, cron, CI), mpsprof starts the script in a
group of its own: a signal sent to mpsprof's group (``kill -- -PGID``, GNU ``timeout``)
then reaches mpsprof alone, which passes it on once, instead of the script getting it
twice (from the sender and from mpsprof). But a group leader cannot call ``os.setsid()``
(EPERM), and under ``python train.py`` in that context the script is no leader (it is in
its shell's group): daemonising code, ``start_new_session``-style helpers failed under
mpsprof only.

So the group is led by a short-lived holder process: the holder makes itself a group
leader, the script joins that group (``setpgid(0, holder)``) when it starts, and the
holder exits. The group lives on as long as a member does (its id is not reused meanwhile),
and the script is a member, not the leader: ``os.setsid()`` works as under python.

At a terminal the script is its own group's leader, as a shell's job is (and as python
is there): the terminal's foreground job is handed over by that group (``foreground.py``,
``tui/terminal_loan.py``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

_HOLD = "import os\ntry:\n    os.read(0, 1)\nexcept BaseException:\n    pass\n"


class GroupHolder:
    """Leads a new process group until :meth:`release`; :attr:`pgid` is the group's id."""

    def __init__(self) -> None:
        kwargs: dict[str, object] = {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}
        # a shell's `read` costs ~1 ms; python is the fallback where there is no /bin/sh
        argv = ["/bin/sh", "-c", "read -r _ || true"] if os.path.exists("/bin/sh") else [sys.executable, "-S", "-I", "-c", _HOLD]
        self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, close_fds=True, **kwargs)  # type: ignore[call-overload]
        self.pgid = self._proc.pid

    def join_kwargs(self) -> dict[str, object]:
        """Popen arguments that start a process in this group."""
        if sys.version_info >= (3, 11):
            return {"process_group": self.pgid}
        pgid = self.pgid
        return {"preexec_fn": lambda: os.setpgid(0, pgid)}  # pragma: no cover - Python 3.10

    def release(self) -> None:
        """The member has joined (or failed to start): the holder may go."""
        try:
            if self._proc.stdin is not None:
                self._proc.stdin.close()
        except OSError:
            pass
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # pragma: no cover - it only waits on its stdin
            self._proc.kill()
            self._proc.wait()


def holder_or_none() -> GroupHolder | None:
    """A holder, or None where none could be started (then the script leads its group)."""
    try:
        return GroupHolder()
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def inherited_fds() -> tuple[int, ...]:
    """Descriptors above 2 that we were started with (``mpsprof run s.py 3>f``): python
    would hand them to the script, so do we. Only inheritable ones: every descriptor
    mpsprof opens itself (the event channel, the recording, the app's own) is created
    non-inheritable (PEP 446), so none of ours leaks into the script."""
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            names = os.listdir(folder)
            break
        except OSError:
            continue
    else:
        return ()
    fds = []
    for name in names:
        try:
            fd = int(name)
            if fd > 2 and os.get_inheritable(fd):
                fds.append(fd)
        except (ValueError, OSError):  # the listing's own descriptor is closed by now
            continue
    return tuple(sorted(fds))


def leader_kwargs(own_group: bool) -> dict[str, Any]:
    """Start the child in its own process group (``process_group`` needs Python 3.11)."""
    if not own_group:
        return {}
    if sys.version_info >= (3, 11):
        return {"process_group": 0}
    return {"preexec_fn": os.setpgrp}  # pragma: no cover - Python 3.10


def pgid_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None
