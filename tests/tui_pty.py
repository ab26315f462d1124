"""Drive the real ``mpsprof`` TUI in a pseudo-terminal, as a user's terminal would.

Used by the end-of-run tests (what is left on the terminal once the app has quit) and by
``benchmarks/tui_cpu.py`` (what the app costs the parent process). The terminal's output
is read by a thread so the app never blocks on a full pty buffer.
"""

from __future__ import annotations

import fcntl
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


class TuiProcess:
    """``python [PYTHON_ARGS] -m mpsprofiler ARGS`` with a pty of ``size`` (columns, rows) on stdin,
    stdout and stderr; ``output`` is every byte it wrote to the terminal."""

    def __init__(self, args: Sequence[str], size: tuple[int, int] = (80, 24), cwd: Path = REPO,
                 env: dict[str, str] | None = None, python_args: Sequence[str] = ()) -> None:
        leader, follower = pty.openpty()
        cols, rows = size
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        environ = dict(env if env is not None else os.environ)
        environ.setdefault("OMP_NUM_THREADS", "1")
        environ["TERM"] = "xterm-256color"
        environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), environ.get("PYTHONPATH", "")) if p)
        environ.pop("NO_COLOR", None)
        self.proc = subprocess.Popen([sys.executable, *python_args, "-m", "mpsprofiler", *args], cwd=cwd, env=environ,
                                     stdin=follower, stdout=follower, stderr=follower, start_new_session=True)
        os.close(follower)
        self._leader = leader
        self._chunks: list[bytes] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self._leader, 65536)
            except OSError:  # the other side closed: the process has gone
                return
            if not data:
                return
            with self._lock:
                self._chunks.append(data)

    @property
    def output(self) -> bytes:
        with self._lock:
            return b"".join(self._chunks)

    def send(self, keys: str) -> None:
        os.write(self._leader, keys.encode())

    def wait_for(self, condition, timeout: float = 60.0, what: str = "the app") -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if self.proc.poll() is not None:
                raise AssertionError(f"mpsprof exited ({self.proc.returncode}) while waiting for {what}:\n"
                                     + self.output[-3000:].decode(errors="replace"))
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(0.1)

    def wait_output(self, needle: bytes, timeout: float = 60.0) -> None:
        self.wait_for(lambda: needle in self.output, timeout, repr(needle))

    def finish(self, timeout: float = 60.0) -> int:
        """Wait for the process to exit and for the terminal to be read to its end."""
        try:
            code = self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.kill()
            self._reader.join(timeout=5)
            self.close_terminal()
        return code

    def close_terminal(self) -> None:
        """Close the terminal's side of the pty, as a closed window or a killed tmux pane
        does. mpsprof is not the pty's controlling process, so no SIGHUP comes with it:
        the app must notice the dead terminal by itself."""
        if self._leader >= 0:
            os.close(self._leader)
            self._leader = -1

    def kill(self) -> None:
        """SIGKILL mpsprof and the training it started (its own session's process group:
        a killed mpsprof cannot stop its child any more)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        self.proc.wait()

    def after_app(self) -> str:
        """What the terminal shows once the app has left its alternate screen."""
        out = self.output
        cut = out.rfind(b"\x1b[?1049l")
        return out[cut + len(b"\x1b[?1049l"):].decode(errors="replace") if cut >= 0 else ""
