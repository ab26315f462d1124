"""Log: the script's own output (stdout and stderr, as written to ``output.log``)."""

from __future__ import annotations

from pathlib import Path

from textual.app import ComposeResult
from textual.widget import Widget
from textual.widgets import Static

from ...session.recording import open_regular
from ..state import RunState
from .output_log import OutputLog
from .quiet import quiet_update

TAIL_BYTES = 2 << 20
"""A recorded log is read from its last 2 MiB: the view keeps 5,000 lines anyway."""


class LogPanel(Widget):
    DEFAULT_CSS = """
    LogPanel { layout: vertical; }
    LogPanel #log-path { height: 1; padding: 0 1; color: $text-muted; }
    LogPanel OutputLog { height: 1fr; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._path: Path | None = None
        self._skipped = 0
        self._every_rank = False
        self._copy_error: str | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="log-path", markup=False)  # a path may hold "[...]"
        log = OutputLog(id="log-output")
        log.on_sync = self._update_path  # the line count follows what the view shows
        yield log

    @property
    def output(self) -> OutputLog:
        return self.query_one(OutputLog)

    def write(self, text: str, skipped: int = 0) -> None:
        if skipped:
            self._skipped += skipped
            text = f"\n[mpsprof: {skipped} bytes of fast output skipped]\n" + text
        self.output.write(text)

    def copy_failed(self, error: str) -> None:
        """The copy in output.log stopped (a full disk): the path line says so for good."""
        self._copy_error = error
        self._update_path()

    def set_path(self, path: Path | None) -> None:
        self._path = path
        self._update_path()

    def load_file(self, path: Path) -> bool:
        """Show a recorded run's ``output.log`` (its tail); False when there is none."""
        try:
            with open_regular(path) as fh:  # a FIFO would block the app forever
                fh.seek(0, 2)
                size = fh.tell()
                fh.seek(max(0, size - TAIL_BYTES))
                data = fh.read()
        except OSError:
            return False
        self._path = path
        text = data.decode("utf-8", "replace")
        if size > TAIL_BYTES:
            text = text.split("\n", 1)[-1]
        self.output.write(text)
        self._update_path()
        return True

    def show_missing(self, state: RunState) -> None:
        mode = state.session.run.get("mode")
        why = "the run was headless: its output went to the terminal" if mode == "headless" else "no output.log in the run directory"
        self.query_one("#log-path", Static).update(f"no output recorded ({why})")

    def _update_path(self) -> None:
        if self._path is None:
            return
        lines = self.output.line_count
        ranks = " · all ranks" if self._every_rank else ""
        where = f"{self._path} (not written since: {self._copy_error})" if self._copy_error else str(self._path)
        quiet_update(self.query_one("#log-path", Static),
                     f"{where} · {lines} line{'s' if lines != 1 else ''} shown (last 5,000 kept){ranks}")

    def update_state(self, state: RunState) -> None:
        """The log is fed by its own messages, not by the session; a distributed run's
        one log holds every rank's output, whichever rank the other panels show."""
        self.output.catch_up()
        if state.distributed != self._every_rank:
            self._every_rank = state.distributed
            self._update_path()
