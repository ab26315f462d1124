"""The script as the terminal's foreground job, the way a shell runs it.

Started from a terminal, ``python train.py`` is the foreground process group: Ctrl-C and
Ctrl-Z reach it, ``getpass`` and ``input`` read the terminal even when stdin is a pipe,
and ``kill -INT`` of that one process interrupts it. Under mpsprof the script gets its
own process group and mpsprof hands it the terminal (``tcsetpgrp``), as a shell does
for a job: the terminal's Ctrl-C and Ctrl-Z then reach the script only (once), a signal
sent to mpsprof itself is passed on, and when the script is stopped (Ctrl-Z) mpsprof
takes the terminal back and stops too, so the shell sees the job stopped; ``fg`` / ``bg``
continue both.

Used only when mpsprof is itself the foreground job of its controlling terminal and no
TUI owns that terminal; anywhere else (no terminal, a background job, a pty that is not
the controlling terminal) the launcher keeps its plain process-group rules.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable

POLL_S = 0.05
"""How often :meth:`ForegroundTerminal.wait` looks at the script: a signal for mpsprof that
the kernel handed to another of its threads is passed on within this."""


def tui_possible() -> bool:
    """The live view may take the terminal: stdin, stdout AND stderr are terminals (with
    ``2>err.log`` the app would draw into the file and leave the screen blank), TERM is
    not ``dumb``, and we are the terminal's foreground job. Started in the background
    (``mpsprof run train.py &``) the app's first terminal call would stop the whole job
    (SIGTTOU) before the script ever started, where ``python train.py &`` runs: there
    the run is headless. A terminal that is not our controlling one (``tcgetpgrp``
    fails) has no foreground job to be stopped by."""
    if os.environ.get("TERM") == "dumb":
        return False
    for fd in (0, 1, 2):
        try:
            if not os.isatty(fd):
                return False
        except OSError:
            return False
    try:
        return os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return True


class ForegroundTerminal:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    @classmethod
    def claim(cls) -> ForegroundTerminal | None:
        """Our controlling terminal, if we are its foreground job; else None."""
        try:
            fd = os.open("/dev/tty", os.O_RDWR | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return None
        try:
            if os.tcgetpgrp(fd) == os.getpgrp():
                return cls(fd)
        except OSError:
            pass
        os.close(fd)
        return None

    def preexec(self) -> Callable[[], None]:
        """Run in the child before exec: its own group, and the terminal's foreground."""
        fd = self.fd

        def become_foreground() -> None:
            os.setpgid(0, 0)
            _give(fd, os.getpgrp())

        return become_foreground

    def give(self, pgid: int) -> None:
        try:
            _give(self.fd, pgid)
        except OSError:
            pass

    def take_back(self) -> None:
        self.give(os.getpgrp())

    def we_are_foreground(self) -> bool:
        try:
            return os.tcgetpgrp(self.fd) == os.getpgrp()
        except OSError:
            return False

    def wait(self, proc: subprocess.Popen[bytes]) -> int:
        """Wait for the child like a shell: follow it into Ctrl-Z and out of it."""
        try:
            while True:
                try:
                    # not blocking: our signal handlers run between the polls (see exit_wait.wait_awake)
                    pid, status = os.waitpid(proc.pid, os.WUNTRACED | os.WNOHANG)
                except ChildProcessError:  # reaped by Popen.poll() on another thread
                    return proc.wait()
                if pid == 0:
                    time.sleep(POLL_S)
                    continue
                if os.WIFSTOPPED(status):
                    self._stopped(proc.pid)
                    continue
                proc.returncode = os.waitstatus_to_exitcode(status)
                return proc.returncode
        finally:
            self.take_back()

    def _stopped(self, pgid: int) -> None:
        """The script stopped (Ctrl-Z): so do we; on SIGCONT (fg or bg) it continues too."""
        self.take_back()
        os.kill(os.getpid(), signal.SIGSTOP)
        # continued: in the foreground (fg) the script gets the terminal back
        if self.we_are_foreground():
            self.give(pgid)
        try:
            os.killpg(pgid, signal.SIGCONT)
        except OSError:
            pass

    def close(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass


def _give(fd: int, pgid: int) -> None:
    """``tcsetpgrp`` from what may be a background group: SIGTTOU would stop us, so it is
    blocked for the call (POSIX then lets the call through)."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTTOU})
    try:
        os.tcsetpgrp(fd, pgid)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
