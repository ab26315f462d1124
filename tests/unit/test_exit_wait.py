"""The launcher's wait for the training process (launcher/exit_wait.py).

It sleeps until the child exits or a signal arrives, with no clock of its own: the child's
exit wakes it through a pidfd, and a signal that the kernel hands to another thread wakes
it through Python's signal wakeup pipe, so the handler (which passes the signal on to the
script) runs at once. Here the safety poll is an hour: only those two can wake it. A
watchdog ends the child after 30 s, so a broken wake fails the test instead of hanging it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from mpsprofiler.launcher import exit_wait

pytestmark = pytest.mark.skipif(not hasattr(os, "pidfd_open") or threading.current_thread() is not threading.main_thread(),
                                reason="pidfd (Linux) and the main thread (signal handlers)")


def _child(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code])


def _watchdog(proc: subprocess.Popen[bytes], fired: list[bool]) -> threading.Timer:
    def kill() -> None:
        fired.append(True)
        proc.kill()

    timer = threading.Timer(30.0, kill)
    timer.daemon = True
    timer.start()
    return timer


def test_the_childs_exit_ends_the_wait_with_its_status(monkeypatch: Any) -> None:
    monkeypatch.setattr(exit_wait, "SAFETY_POLL", 3600.0)
    proc = _child("import time, sys; time.sleep(0.3); sys.exit(3)")
    fired: list[bool] = []
    timer = _watchdog(proc, fired)
    try:
        assert exit_wait.wait_awake(proc) == 3
    finally:
        timer.cancel()
    assert not fired


def test_a_signal_handed_to_another_thread_runs_its_handler_during_the_wait(monkeypatch: Any) -> None:
    monkeypatch.setattr(exit_wait, "SAFETY_POLL", 3600.0)
    proc = _child("import time; time.sleep(60)")
    fired: list[bool] = []
    handled: list[str] = []

    def on_usr1(signum: int, frame: Any) -> None:  # what the launcher's forwarding does
        handled.append(threading.current_thread().name)
        proc.terminate()

    previous = signal.signal(signal.SIGUSR1, on_usr1)
    timer = _watchdog(proc, fired)

    def send() -> None:
        time.sleep(0.5)  # sent while the wait sleeps, not before it began
        signal.pthread_kill(threading.get_ident(), signal.SIGUSR1)

    other = threading.Thread(target=send)
    try:
        other.start()  # the signal goes to this other thread, never to the waiting one
        code = exit_wait.wait_awake(proc)
    finally:
        timer.cancel()
        other.join()
        signal.signal(signal.SIGUSR1, previous)
    assert not fired and handled == [threading.main_thread().name] and code == -signal.SIGTERM
    assert signal.set_wakeup_fd(-1) == -1  # the wakeup pipe was given back


def test_a_wakeup_fd_in_use_is_left_alone_and_the_wait_still_ends(monkeypatch: Any) -> None:
    read, write = os.pipe()
    os.set_blocking(write, False)
    signal.set_wakeup_fd(write)
    try:
        proc = _child("import sys; sys.exit(5)")
        assert exit_wait.wait_awake(proc) == 5
        assert signal.set_wakeup_fd(write) == write
    finally:
        signal.set_wakeup_fd(-1)
        os.close(read)
        os.close(write)
