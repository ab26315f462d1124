"""The run header: what runs, where, how it is doing: readable from across the room."""

from __future__ import annotations

import shlex
import time
from typing import TYPE_CHECKING

from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.content import Content
from textual.widget import Widget
from textual.widgets import Label

from ...events.payloads import RunFields
from ...units import fmt_pct
from ..state import RunState, fmt_clock

if TYPE_CHECKING:
    from ...session.session import Session

STATUS_ICONS = {
    "running": "●",
    "stopping": "◌",
    "finished": "✔",
    "crashed": "✖",
    "stopped": "■",
    "incomplete": "?",
    "failed": "✖",
}
SHRINK_SLACK = 2
"""Cells a header label may shrink by without a relayout (it keeps its width, blank-padded)."""


class RankBadge(Label):
    """Which rank the panels show (distributed runs only); a click moves to the next one."""

    async def on_click(self, event: events.Click) -> None:
        event.stop()
        await self.app.run_action("previous_rank" if event.shift else "next_rank")


class RunHeader(Widget):
    DEFAULT_CSS = """
    RunHeader {
        height: 2;
        background: $panel;
        padding: 0 1;
    }
    RunHeader Horizontal { height: 1; }
    RunHeader Label { margin-right: 2; }
    RunHeader #hdr-app { color: $accent; text-style: bold; margin-right: 1; }
    RunHeader #hdr-script { text-style: bold; width: 1fr; }
    RunHeader #hdr-status { padding: 0 1; margin-right: 1; text-style: bold; }
    RunHeader #hdr-status.-running { background: $success-muted; color: $text-success; }
    RunHeader #hdr-status.-stopping { background: $warning-muted; color: $text-warning; }
    RunHeader #hdr-status.-finished { background: $success-muted; color: $text-success; }
    RunHeader #hdr-status.-crashed { background: $error-muted; color: $text-error; }
    RunHeader #hdr-status.-failed { background: $error-muted; color: $text-error; }
    RunHeader #hdr-status.-stopped { background: $warning-muted; color: $text-warning; }
    RunHeader #hdr-status.-incomplete { background: $warning-muted; color: $text-warning; }
    RunHeader #hdr-elapsed { margin-right: 0; min-width: 8; text-align: right; }
    RunHeader #hdr-device { color: $text-muted; }
    RunHeader #hdr-rank { background: $accent-muted; color: $text-accent; text-style: bold; padding: 0 1; margin-right: 1; }
    RunHeader #hdr-rank:hover { background: $accent; color: $text; }
    RunHeader .figure { color: $text-muted; }
    RunHeader #hdr-findings { width: 1fr; text-align: right; margin-right: 0; }
    """

    def compose(self) -> ComposeResult:
        with Horizontal(id="hdr-top"):
            yield Label("mpsprof", id="hdr-app")
            yield Label("", id="hdr-script")
            yield Label("", id="hdr-status")
            yield Label("", id="hdr-elapsed")
        with Horizontal(id="hdr-bottom"):
            rank = RankBadge("", id="hdr-rank")
            rank.tooltip = "r / R or a click: next / previous rank (9: compare the ranks)"
            yield rank
            yield Label("", id="hdr-device")
            yield Label("", id="hdr-step", classes="figure")
            yield Label("", id="hdr-rate", classes="figure")
            yield Label("", id="hdr-wait", classes="figure")
            yield Label("", id="hdr-findings")

    def update_state(self, state: RunState, now: float | None = None) -> None:
        session = state.session
        now = time.monotonic() if now is None else now
        self._set("#hdr-script", script_line(session.run, session.script))
        status = state.status
        self._set("#hdr-status", f"{STATUS_ICONS.get(status, '•')} {escape(state.status_text())}")
        badge = self.query_one("#hdr-status", Label)
        if not badge.has_class(f"-{status}"):
            badge.set_classes(f"-{status}")
        self._set("#hdr-elapsed", fmt_clock(state.elapsed(now)))
        rank = state.rank_label()
        badge_rank = self.query_one("#hdr-rank", Label)
        if badge_rank.display != bool(rank):
            badge_rank.display = bool(rank)
        if rank:
            self._set("#hdr-rank", f"{escape(rank)} ▸")
        self._set("#hdr-device", device_line(session))
        steps = session.steps
        self._set("#hdr-step", f"step [b $foreground]{steps.last_index + 1 if steps.count else 0}[/]")
        rate = state.steps_per_second()
        self._set("#hdr-rate", f"[b $foreground]{rate:.1f}[/] steps/s" if rate else "– steps/s")
        share = steps.data_wait_share()
        wait_style = "$text-warning" if share is not None and share >= 0.15 else "$foreground"
        self._set("#hdr-wait", f"data wait [b {wait_style}]{fmt_pct(share)}[/]")
        self._set("#hdr-findings", findings_line(state))

    def _set(self, selector: str, text: str) -> None:
        """Update a label when its text changed; lay the header out again only when it
        outgrew the width it was laid out at, or shrank by more than SHRINK_SLACK cells
        (a relayout lays the whole screen out: ~20 ms; a rate going 9999.9 -> 10000.0 ->
        9998.7 would ask for one every second, and the figures would jitter sideways)."""
        label = self.query_one(selector, Label)
        if getattr(label, "_last_text", None) != text:
            width = Content.from_markup(text).cell_length
            label._last_text = text  # type: ignore[attr-defined]
            label.update(text, layout=_needs_layout(label, width))


def _needs_layout(label: Label, width: int) -> bool:
    """Would ``width`` cells of text change the label's laid-out width (past the slack)?"""
    styles = label.styles
    if styles.width is not None and not styles.width.is_auto:
        return False  # 1fr: the width does not follow the text
    laid = label.content_size.width  # the text width of its last layout
    if width > laid:
        return True
    floor = styles.min_width.cells if styles.min_width is not None else None
    floor = (floor or 0) - styles.padding.width
    return width < laid - SHRINK_SLACK and laid > floor + SHRINK_SLACK


def script_line(run: RunFields, fallback: str) -> str:
    argv = run.get("argv")
    argv = argv if isinstance(argv, list) else []
    args = " ".join(shlex.quote(str(a)) for a in argv[1:])
    text = f"{fallback} {args}".strip()
    return escape(text)


def device_line(session: Session) -> str:
    kind = session.device_kind
    name = str(session.model.get("device_name") or "")
    chip = str(session.env.get("chip") or "")
    parts = [kind]
    if name and name.lower() != kind:
        parts.append(str(name))
    if chip and chip not in parts:
        parts.append(str(chip))
    return escape(" · ".join(parts))


def findings_line(state: RunState) -> str:
    counts = state.findings_by_severity()
    if not counts:
        return "[$text-muted]no findings yet[/]" if state.running else "[$text-success]no findings[/]"
    parts = []
    for severity, style, icon in (("critical", "$text-error", "✖"), ("warning", "$text-warning", "▲"), ("info", "$text-primary", "●")):
        if counts.get(severity):
            parts.append(f"[b {style}]{icon} {counts[severity]} {severity}[/]")
    return "  ".join(parts)


def escape(text: str) -> str:
    """Content markup must not read ``[...]`` in user text as styles."""
    from textual.markup import escape as _escape

    return _escape(text)
