"""Drive a real terminal: a tmux session runs the real CLI, tests type keys into it and
read the screen (``send-keys`` / ``capture-pane``)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from helpers import child_env


class Tmux:
    def __init__(self, cwd: Path, width: int = 130, height: int = 40) -> None:
        if shutil.which("tmux") is None:
            pytest.skip("tmux is not installed")
        self.name = f"mpsprof-test-{uuid.uuid4().hex[:8]}"
        env = child_env(TERM="xterm-256color")
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items() if k in ("PYTHONPATH", "OMP_NUM_THREADS", "PATH", "TERM", "HOME"))
        subprocess.run(["tmux", "new-session", "-d", "-s", self.name, "-x", str(width), "-y", str(height), "-c", str(cwd),
                        f"env -i {exports} bash --norc --noprofile"], check=True)
        self.send("export PS1='$ '", enter=True)
        self.send("clear", enter=True)

    def send(self, keys: str, enter: bool = False, literal: bool = True) -> None:
        cmd = ["tmux", "send-keys", "-t", self.name]
        cmd += ["-l", keys] if literal else [keys]
        subprocess.run(cmd, check=True)
        if enter:
            subprocess.run(["tmux", "send-keys", "-t", self.name, "Enter"], check=True)

    def key(self, key: str) -> None:
        """A named key: C-c, C-z, Enter, q ..."""
        self.send(key, literal=False)

    def screen(self, history: bool = True) -> str:
        cmd = ["tmux", "capture-pane", "-p", "-t", self.name] + (["-S", "-200"] if history else [])
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout

    def wait_for(self, text: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if text in screen:
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} did not appear; the terminal shows:\n{screen}")
            time.sleep(0.2)

    def wait_for_exit(self, timeout: float = 60.0) -> tuple[int, str]:
        """The exit status a :func:`mpsprof_line` echoed, and the screen."""
        import re

        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            found = re.search(r"^EXIT=(\d+)\s*$", screen, re.M)
            if found:
                return int(found.group(1)), screen
            if time.monotonic() > deadline:
                raise AssertionError(f"the command did not end; the terminal shows:\n{screen}")
            time.sleep(0.2)

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)


def mpsprof_line(*args: str, echo: bool = True) -> str:
    """A shell command line running the CLI of this checkout, its exit status echoed."""
    import sys

    return " ".join(shlex.quote(a) for a in [sys.executable, "-m", "mpsprofiler", *args]) + ("; echo EXIT=$?" if echo else "")


def pid_of(pattern: str) -> int:
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()
    assert out, f"no process matches {pattern!r}"
    return int(out[0])


def stat_of(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


__all__ = ["Tmux", "mpsprof_line", "pid_of", "stat_of", "os"]
