"""Warnings: the script's crash (with the line in the user's code), Python warnings it
raised, and instruments of the probe that failed and were switched off."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Static

from ..safe import raw
from ..state import RunState
from .quiet import quiet_update

if TYPE_CHECKING:
    from ...session.session import CrashInfo, Session


class WarningsPanel(Widget):
    DEFAULT_CSS = """
    WarningsPanel VerticalScroll { height: 1fr; }
    WarningsPanel .box { border: round $primary 40%; border-title-color: $text-accent; padding: 0 1; height: auto; }
    WarningsPanel #warn-crash { border: round $error; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._key: object = None

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            crash = Static(id="warn-crash", classes="box")
            crash.border_title = "Crash"
            yield crash
            for name, title in (("warn-list", "Python warnings"), ("warn-probe", "Probe")):
                box = Static(id=name, classes="box")
                box.border_title = title
                yield box

    def update_state(self, state: RunState) -> None:
        session = state.session
        key = (id(session), id(session.crash), sum(w.count for w in session.warnings.values()), len(session.warnings),
               session.warnings_dropped.count, len(session.probe_errors))
        if key == self._key:
            return
        self._key = key
        crash = self.query_one("#warn-crash", Static)
        crash.display = session.crash is not None
        if session.crash is not None:
            rank = crash_rank(state)
            crash.border_title = "Crash" if rank is None else f"Crash (rank {rank})"
            crash.update(crash_text(session.crash))
        quiet_update(self.query_one("#warn-list", Static), warnings_table(session))
        quiet_update(self.query_one("#warn-probe", Static), probe_text(session))


def crash_rank(state: RunState) -> int | None:
    """The rank that raised the crash shown (the job view shows the first rank's crash)."""
    crash = state.session.crash
    if crash is None or not state.job.ranks:
        return None
    if state.session is not state.job:
        return state.shown_rank
    for rank, sub in sorted(state.job.ranks.items()):
        c = sub.crash
        if c is not None and (c.type, c.message, c.ts) == (crash.type, crash.message, crash.ts):
            return rank
    return None


def crash_text(crash: CrashInfo) -> Group:
    head = Text()
    head.append(f"{crash.type}: ", style="bold red")  # Text.append never reads markup
    head.append(str(crash.message))
    parts: list[Text] = [head]
    frame = crash.user_frame
    if frame:
        parts.append(Text(f"\nin your code: {frame.get('file')}:{frame.get('line')} in {frame.get('func')}", style="bold"))
        if frame.get("code"):
            parts.append(Text(f"    {str(frame['code']).strip()}", style="green"))
    if crash.frames:
        parts.append(Text("\ntraceback (most recent call last):", style="dim"))
        for f in crash.frames[-12:]:
            style = "" if f.get("user") else "dim"
            parts.append(Text(f"  {f.get('file')}:{f.get('line')} in {f.get('func')}", style=style))
    return Group(*parts)


def warnings_table(session: Session) -> Table | Text:
    if not session.warnings:
        return Text("none raised", style="dim")
    table = Table(box=None, padding=(0, 2, 0, 0), expand=True, header_style="bold")
    table.add_column("count", justify="right", no_wrap=True)
    table.add_column("category", no_wrap=True, style="yellow")
    table.add_column("message", ratio=1, overflow="fold")
    table.add_column("where", no_wrap=True, style="dim")
    records = sorted(session.warnings.values(), key=lambda w: (-w.count, w.first_ts))
    for w in records:
        where = f"{w.filename.rsplit('/', 1)[-1]}:{w.lineno}" if w.filename else ""
        table.add_row(raw(f"{w.count}×"), raw(w.category), raw(w.message), raw(where))
    dropped = session.warnings_dropped.text()
    if dropped:  # past the cap of distinct messages: the list is incomplete
        table.add_row("", "", Text(dropped, style="dim italic"), "")
    return table


def probe_text(session: Session) -> Text | Group:
    if not session.probe_errors:
        return Text("every instrument worked", style="green")
    lines = [Text("switched off after an error (the training was not affected):", style="yellow")]
    for error in session.probe_errors:
        where = f" (at {str(error['where'])})" if error.get("where") else ""
        lines.append(Text(f"  {error.get('instrument') or 'instrument'}: {error.get('message') or ''}{where}"))
    return Group(*lines)
