"""A list of findings, most severe first, colour-coded by severity."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.binding import Binding
from textual.widgets import OptionList
from textual.widgets.option_list import Option

if TYPE_CHECKING:
    from ...diagnosis.findings import Finding

SEVERITY_STYLE = {"critical": ("✖", "bold red"), "warning": ("▲", "bold yellow"), "info": ("●", "bold blue")}


def finding_prompt(finding: Finding, compact: bool = False) -> Text:
    icon, style = SEVERITY_STYLE.get(finding.severity, ("•", "bold"))
    text = Text()
    text.append(f"{icon} ", style=style)
    text.append(finding.title, style="bold" if not compact else "")
    if getattr(finding, "provisional", False):
        text.append(" (provisional)", style="italic dim")
    if not compact:
        meta = [finding.severity]
        if finding.first_step is not None:
            meta.append(f"from step {finding.first_step}")
        text.append("\n  " + " · ".join(meta), style="dim")
    return text

TITLES_EVERY = 10.0
"""Seconds between rebuilds of a live list whose titles' figures changed."""


class FindingsList(OptionList, inherit_bindings=False):
    """``↑`` ``↓`` pick a finding; the page keys, home and end are left to the panel, which
    scrolls the selected finding's detail with them (the list is short; the detail with
    its Fix is what runs below the fold at 80x24)."""

    BINDINGS = [
        Binding("down", "cursor_down", "Down", show=False),
        Binding("up", "cursor_up", "Up", show=False),
        Binding("enter", "select", "Select", show=False),
    ]
    DEFAULT_CSS = """
    FindingsList {
        height: 1fr;
        border: none;
        padding: 0;
        background: transparent;
        &:focus { border: none; background-tint: transparent; }
    }
    """

    def __init__(self, *, compact: bool = False, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.compact = compact
        self._rules: list[str] = []
        self._signature: tuple[tuple[object, ...], ...] = ()
        self._built_at = 0.0

    def set_findings(self, findings: Sequence[Any], throttle: bool = False) -> bool:
        """Show ``findings``; keeps the highlighted rule. True when the list changed.

        With ``throttle`` (a live run), a list whose findings are the same and only
        their titles' figures moved is rebuilt every :data:`TITLES_EVERY` seconds, not
        at every diagnosis (a rebuild re-renders and re-lays out the whole list)."""
        signature = tuple((f.rule, f.severity, f.title, f.first_step, getattr(f, "provisional", False)) for f in findings)
        if signature == self._signature:
            return False
        same_findings = [s[:2] + s[3:] for s in signature] == [s[:2] + s[3:] for s in self._signature]
        now = time.monotonic()
        if throttle and same_findings and now - self._built_at < TITLES_EVERY:
            return False
        self._built_at = now
        self._signature = signature
        keep = self.highlighted_rule
        self.clear_options()
        self._rules = [f.rule for f in findings]
        self.add_options([Option(finding_prompt(f, self.compact), id=f.rule) for f in findings])
        if self._rules:
            self.highlighted = self._rules.index(keep) if keep in self._rules else 0
        return True

    @property
    def highlighted_rule(self) -> str | None:
        index = self.highlighted
        if index is None or not (0 <= index < len(self._rules)):
            return None
        return self._rules[index]

    def select_rule(self, rule: str) -> bool:
        if rule in self._rules:
            self.highlighted = self._rules.index(rule)
            return True
        return False
