"""Every message the TUI's background readers post to the app.

Readers (the controller's event thread, the output tail, the child waiter) run off the
UI thread: they only ever post one of these, and the app's handlers, on the UI thread,
are the only code that touches the session or a widget.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from textual.message import Message


@dataclass
class EventsArrived(Message):
    """New events wait in the app's inbox (one pending message at a time: mergeable)."""


@dataclass
class OutputArrived(Message):
    """Text the script wrote to stdout / stderr since the previous message (~250 ms)."""

    text: str
    skipped: int = 0
    """Bytes dropped because the script wrote faster than the tail could show."""


@dataclass
class RunStarted(Message):
    """The child process is up; its output goes to ``output_path``."""

    output_path: Path | None


@dataclass
class RunEnded(Message):
    """The child exited (its ``exit`` event is already in the inbox)."""

    returncode: int


@dataclass
class RunFailed(Message):
    """The child could not be started at all (bad interpreter, fork failure...)."""

    error: str


@dataclass
class ShowFinding(Message):
    """A widget asks for the Findings panel, with one finding selected."""

    rule: str


@dataclass
class ShowRank(Message):
    """A widget asks for one rank's figures in every per-run panel (None: the job view)."""

    rank: int | None


@dataclass
class OutputCopyFailed(Message):
    """``output.log`` could not be written any more (a full disk): said once."""

    error: str


@dataclass
class TerminalWanted(Message):
    """The script reads the terminal (``input()``, pdb) and wants it (True), or is done."""

    want: bool
