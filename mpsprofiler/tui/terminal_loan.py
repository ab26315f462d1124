"""Lend the terminal to the script while it reads it (``input()``, ``breakpoint()``).

The probe asks over the event channel (see ``probe/terminal.py``). The app suspends
itself (the terminal is as it was before mpsprof started), echoes the script's output
there, and makes the script the terminal's foreground job; the script prompts and reads
on ``/dev/tty``. When it is done the app takes the terminal back after a short pause
(pdb stepping asks again at once: the view does not flicker in between) and resumes.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

RESUME_AFTER = 0.5
"""Seconds without a new request before the view comes back."""


class TerminalLender:
    def __init__(self, app: Any) -> None:
        self.app = app
        self._suspended: Any = None
        self._tty: int | None = None
        self._timer: Any = None

    @property
    def lent(self) -> bool:
        return self._tty is not None

    def request(self, want: bool) -> None:
        """On the UI thread: the script wants the terminal, or is done with it."""
        if want:
            if self._timer is not None:
                self._timer.stop()
                self._timer = None
            if not self.lent:
                self._lend()
        elif self.lent and self._timer is None:
            self._timer = self.app.set_timer(RESUME_AFTER, self.take_back)

    def _lend(self) -> None:
        controller = self.app.controller
        proc = controller.process if controller is not None else None
        if proc is None or proc.poll() is not None:
            return
        try:
            tty = os.open("/dev/tty", os.O_RDWR | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return
        suspended = self.app.suspend()
        try:
            suspended.__enter__()
        except Exception:  # noqa: BLE001 - SuspendNotSupported (no real terminal): the script reads nothing
            os.close(tty)
            return
        # Textual's suspend expects the event loop to wait inside it; ours keeps running
        # (events, output), so nothing may be drawn meanwhile: the writer thread is gone
        self.app._begin_batch()
        self._suspended, self._tty = suspended, tty
        recent = controller.output.start_echo() if controller.output is not None else b""
        lines = recent.decode("utf-8", "replace").split("\n")[-16:]
        try:
            out = sys.__stdout__
            if out is None:  # no stdout at all (pythonw): nothing to show it on
                raise AttributeError("no stdout")
            out.write("\n── mpsprof: the script reads the terminal (input / breakpoint); "
                      "the view comes back when it is done ──\n")
            out.write("\n".join(lines))
            out.flush()
        except (OSError, ValueError, AttributeError):
            pass
        _give(tty, proc.pid)

    def take_back(self) -> None:
        self._timer = None
        tty, self._tty = self._tty, None
        suspended, self._suspended = self._suspended, None
        if tty is None:
            return
        controller = self.app.controller
        if controller is not None and controller.output is not None:
            controller.output.echo = False
        _give(tty, os.getpgrp())
        os.close(tty)
        try:
            suspended.__exit__(None, None, None)
        except Exception:  # noqa: BLE001 - the view could not resume: say why in the log
            self.app.log.error("could not resume the view after lending the terminal")
        self.app._end_batch()
        self.app.refresh(layout=True)


def _give(fd: int, pgid: int) -> None:
    """``tcsetpgrp``; SIGTTOU blocked, since we may be a background group just then."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTTOU})
    try:
        os.tcsetpgrp(fd, pgid)
    except OSError:
        pass
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
