"""The launcher's wait for the training process: woken by its exit or by a signal, not a clock.

The kernel may hand a signal meant for mpsprof to any of its threads (the event reader's,
say): Python's handler then waits for the main thread, and a main thread blocked in
``waitpid()`` is not interrupted, so it passed nothing on until the script exited:
``timeout -s TERM`` lost, the training running on (2 runs in 26 here). ``Popen.wait`` with
a timeout polls with sleeps of at most 50 ms, after each of which the handlers run: 20
wakes a second of the launcher for the whole run, and on a machine where the training has
one core each wake is the training's time.

On Linux the wait sleeps in ``select`` on two descriptors instead: a pidfd of the child
(``os.pidfd_open``, Linux 5.3: readable once the child has exited) and the read end of
Python's signal wakeup pipe (``signal.set_wakeup_fd``: the C-level handler of a signal that
has a Python handler writes to it from whichever thread the kernel chose). Either wakes
the main thread at once, and the Python handlers run as it returns from ``select``; a
signal delivered to the main thread itself interrupts ``select`` and runs them there
(PEP 475). A last poll every :data:`SAFETY_POLL` seconds covers what neither says. Where
either is missing (macOS, an older kernel, a wakeup fd already in use), the 50 ms polls.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time

SAFETY_POLL = 1.0
"""Seconds between checks of the child when nothing woke the wait."""


def wait_awake(proc: subprocess.Popen[bytes]) -> int:
    """``proc.wait()`` that runs our signal handlers while it waits (see the module)."""
    code = _wait_woken(proc)
    if code is not None:
        return code
    while True:
        try:
            return proc.wait(timeout=3600.0)
        except subprocess.TimeoutExpired:
            continue


def _wait_woken(proc: subprocess.Popen[bytes]) -> int | None:
    """The exit status, waiting on a pidfd and the signal wakeup pipe; None where those
    cannot be had (the caller polls)."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        pidfd = opener(proc.pid)
    except OSError:  # ESRCH: reaped already (poll below tells); ENOSYS: an older kernel
        return proc.returncode if proc.poll() is not None else None
    try:
        wake_r, wake_w = os.pipe()
    except OSError:
        os.close(pidfd)
        return None
    ours = False
    try:
        for fd in (wake_r, wake_w):
            os.set_blocking(fd, False)
        try:
            previous = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        except ValueError:  # not the main thread: nobody else's handlers to run here
            return None
        if previous != -1:  # someone else's (an event loop's): leave it theirs
            signal.set_wakeup_fd(previous)
            return None
        ours = True
        while proc.poll() is None:
            ready, _, _ = select.select([pidfd, wake_r], [], [], SAFETY_POLL)
            if wake_r in ready:
                _drain(wake_r)
            if pidfd in ready and proc.poll() is None:
                # exited, and another thread's Popen.wait holds the status for a moment
                # (poll answers None meanwhile): the pidfd stays readable, so do not spin
                time.sleep(0.005)
        return proc.returncode
    finally:
        if ours:
            signal.set_wakeup_fd(-1)
        for fd in (pidfd, wake_r, wake_w):
            os.close(fd)


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass
