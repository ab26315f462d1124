"""``input()`` and ``breakpoint()`` under the TUI: borrow the terminal from the app.

In TUI mode the app owns the terminal and the script's stdin is empty (``/dev/null``):
``input()`` would raise EOFError and ``breakpoint()`` end in BdbQuit. Instead, while
``input()`` waits for a line or pdb waits for a command, the probe asks the app for the
terminal over the event channel (a ``terminal`` control event); the app suspends itself
(the terminal is as it was before mpsprof started), shows the script's output there and
makes the script the terminal's foreground job; the probe waits for that, then prompts
and reads on ``/dev/tty``. When the call returns the probe gives the terminal back and
the app resumes (it waits a moment, so pdb stepping line by line does not flicker).

Only these two entry points are covered (``input()``, and pdb entered through
``breakpoint()`` or ``pdb.set_trace()`` once pdb is imported): other reads of stdin see
an empty stdin, as under ``python train.py < /dev/null``. Without a controlling terminal,
or if the app does not answer, the original behaviour stays.
"""

from __future__ import annotations

import builtins
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

GRANT_TIMEOUT = 10.0
"""Seconds to wait for the app to hand over the terminal before reading stdin as is."""


class TerminalLoan:
    def __init__(self, ask: Callable[[bool], None]) -> None:
        self._ask = ask
        self._depth = 0
        self._lock = threading.RLock()
        self._tty: Any = None
        self._input = builtins.input
        self._stdin = sys.stdin
        self._pdb_patched = False

    def install(self) -> None:
        builtins.input = self.input
        previous_hook = sys.breakpointhook

        def breakpointhook(*args: Any, **kwargs: Any) -> Any:
            self.patch_pdb()
            if previous_hook is sys.__breakpointhook__ and not os.environ.get("PYTHONBREAKPOINT") and not args and not kwargs:
                import pdb

                # what the default hook does, with the caller's frame (not this one)
                return pdb.Pdb().set_trace(sys._getframe(1))
            return previous_hook(*args, **kwargs)

        sys.breakpointhook = breakpointhook
        if "pdb" in sys.modules:
            self.patch_pdb()

    # -- borrowing --------------------------------------------------------------------
    def acquire(self) -> Any:
        """The terminal as a text file once the app has handed it over, or None."""
        with self._lock:
            self._depth += 1
            if self._depth > 1:
                return self._tty
            try:
                tty, fd = _open_tty()
            except OSError:
                return None
            try:
                self._ask(True)
                deadline = time.monotonic() + GRANT_TIMEOUT
                while os.tcgetpgrp(fd) != os.getpgrp():
                    if time.monotonic() > deadline:
                        tty.close()
                        self._ask(False)
                        return None
                    time.sleep(0.02)
            except OSError:
                tty.close()
                return None
            self._tty = tty
            return tty

    def release(self) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth > 0:
                return
            self._depth = 0
            tty, self._tty = self._tty, None
            if tty is not None:
                try:
                    tty.close()
                except OSError:
                    pass
                self._ask(False)

    # -- the entry points --------------------------------------------------------------
    def input(self, prompt: object = "") -> str:
        if sys.stdin is not self._stdin:  # the script chose its own stdin: leave it be
            return self._input(prompt)
        tty = self.acquire()
        if tty is None:
            self.release()
            return self._input(prompt)
        try:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except Exception:
                pass
            tty.write(str(prompt))
            tty.flush()
            line: str = tty.readline()
            if not line:
                raise EOFError
            return line[:-1] if line.endswith("\n") else line
        finally:
            self.release()

    def patch_pdb(self) -> None:
        """pdb prompts and reads on the borrowed terminal while it waits for a command."""
        if self._pdb_patched:
            return
        self._pdb_patched = True
        import pdb

        original = pdb.Pdb.interaction
        loan = self

        def interaction(debugger: Any, *args: Any, **kwargs: Any) -> Any:
            if debugger.stdin is not sys.__stdin__ and debugger.stdin is not loan._stdin:
                return original(debugger, *args, **kwargs)  # a debugger on its own streams
            tty = loan.acquire()
            if tty is None:
                loan.release()
                return original(debugger, *args, **kwargs)
            saved = (debugger.stdin, debugger.stdout, debugger.use_rawinput)
            debugger.stdin = debugger.stdout = tty
            debugger.use_rawinput = False
            try:
                return original(debugger, *args, **kwargs)
            finally:
                debugger.stdin, debugger.stdout, debugger.use_rawinput = saved
                loan.release()

        pdb.Pdb.interaction = interaction  # type: ignore[method-assign,assignment]


def _open_tty() -> tuple[Any, int]:
    """``/dev/tty`` as one text stream for prompts and answers (a tty cannot seek, so
    it is a read/write pair, not ``open(..., "r+")``)."""
    import io

    fd = os.open("/dev/tty", os.O_RDWR | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        pair = io.BufferedRWPair(io.FileIO(fd, "r", closefd=False), io.FileIO(fd, "w", closefd=True))
    except Exception:
        os.close(fd)
        raise
    encoding = getattr(sys.__stdin__, "encoding", None) or "utf-8"
    return io.TextIOWrapper(pair, encoding=encoding, errors="replace", line_buffering=True, write_through=True), fd
