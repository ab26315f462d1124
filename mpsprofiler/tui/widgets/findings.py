"""Findings: the list by severity, and the selected one's evidence and fix as Markdown."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import Markdown, OptionList, Static

from ..state import RunState
from .findings_list import FindingsList
from .quiet import quiet_update

if TYPE_CHECKING:
    from ...diagnosis.findings import Finding

ICONS = {"critical": "✖", "warning": "▲", "info": "●"}
MARKDOWN_EVERY = 10.0
"""Seconds between refreshes of the shown finding's figures while the script runs."""


def escape_tags(text: str) -> str:
    """``<module>`` in prose would be read as an HTML tag and vanish: ``<`` / ``>`` are
    escaped outside code spans and fenced blocks, exactly as in the Markdown report."""
    from ...report.markdown import escape_tags as escape_markdown_tags

    return escape_markdown_tags(text)


def finding_markdown(finding: Finding) -> str:
    """The finding as a Markdown document (the same text a report would show)."""
    meta = [f"**{finding.severity}**", f"`{finding.rule}`"]
    if finding.first_step is not None:
        meta.append(f"first seen at step {finding.first_step}")
    if getattr(finding, "provisional", False):
        steps = finding.facts.get("steady_steps")
        meta.append(f"*provisional: clear on the first {steps} steady steps, confirmed once the rule has all "
                    "the steps it asks for*")
    parts = [
        f"# {ICONS.get(finding.severity, '•')} {escape_tags(finding.title)}",
        " · ".join(meta),
        "## Evidence",
        escape_tags(finding.evidence.strip()) or "_no evidence recorded_",
        "## Fix",
        escape_tags(finding.fix.strip()) or "_no fix recorded_",
    ]
    if finding.references:
        parts.append("## References")
        parts.append("\n".join(f"- <{ref}>" for ref in finding.references))
    parts.append("---\n_Press **c** to copy the fix._")
    return "\n\n".join(parts) + "\n"


def empty_markdown(state: RunState) -> str:
    if state.running:
        return (
            "# No findings yet\n\nDiagnosis re-runs every second while the script runs. "
            "Most rules wait for enough evidence (about 20 steady steps) before they speak.\n"
        )
    if state.rule_errors:
        return "# No findings\n\nSome rule files did not load: see the Environment panel.\n"
    return "# No problems found ✔\n\nNo rule fired for this run.\n"


class FindingDetail(VerticalScroll, inherit_bindings=False):
    """The selected finding's evidence and fix: with the keyboard (``→`` from the list),
    the arrows, page keys, home and end scroll it; ``←`` goes back to the list."""

    BINDINGS = [
        Binding("up", "scroll_up", "Up", show=False),
        Binding("down", "scroll_down", "Down", show=False),
        Binding("home", "scroll_home", "Top", show=False),
        Binding("end", "scroll_end", "Bottom", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
    ]


class FindingsPanel(Widget):
    BINDINGS = [
        Binding("right", "focus_detail", "Detail", show=False),
        Binding("left", "focus_list", "List", show=False),
    ]
    DEFAULT_CSS = """
    FindingsPanel { layout: horizontal; }
    FindingsPanel #fd-list-box { width: 1fr; min-width: 30; max-width: 56; border: round $primary 40%; border-title-color: $text-accent; }
    FindingsPanel #fd-detail { width: 3fr; border: round $primary 40%; padding: 0 1; }
    FindingsPanel #fd-detail:focus-within { border: round $accent; }
    FindingsPanel #fd-list-box:focus-within { border: round $accent; }
    FindingsPanel #fd-empty { color: $text-muted; padding: 1; }
    FindingsPanel Markdown { margin: 0; padding: 0; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._findings: list[Finding] = []
        self._shown: str | None = None
        self._shown_key: str | None = None
        self._shown_at = 0.0
        self._shown_text: str | None = None
        self._live = False

    def compose(self) -> ComposeResult:
        box = Vertical(id="fd-list-box")
        box.border_title = "Findings"
        with box:
            yield FindingsList(id="fd-list")
            yield Static("", id="fd-empty")
        with FindingDetail(id="fd-detail"):
            yield Markdown("", id="fd-markdown")

    def action_focus_detail(self) -> None:
        self.query_one("#fd-detail").focus()

    def action_focus_list(self) -> None:
        self.findings_list.focus()

    @property
    def findings_list(self) -> FindingsList:
        return self.query_one("#fd-list", FindingsList)

    def update_state(self, state: RunState) -> None:
        self._findings = list(state.findings)
        lst = self.findings_list
        lst.set_findings(self._findings, throttle=state.running)
        empty = self.query_one("#fd-empty", Static)
        empty.display = not self._findings
        quiet_update(empty, "nothing yet" if state.running else "none")
        box = self.query_one("#fd-list-box")
        title = f"Findings ({len(self._findings)})"
        if box.border_title != title:
            box.border_title = title
        self._live = state.running
        if not self._findings:
            self._show(None, empty_markdown(state))
        else:
            self._show_selected()

    @property
    def selected(self) -> Finding | None:
        rule = self.findings_list.highlighted_rule
        for f in self._findings:
            if f.rule == rule:
                return f
        return self._findings[0] if self._findings else None

    def select_rule(self, rule: str) -> None:
        self.findings_list.select_rule(rule)
        self._show_selected()

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        self._show_selected()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self._show_selected()

    def _show_selected(self) -> None:
        finding = self.selected
        if finding is None:
            return
        self._show(finding.rule, finding_markdown(finding))

    def _show(self, key: str | None, text: str) -> None:
        """Show a finding's Markdown. While the script runs, the same finding's figures
        are refreshed every few seconds, not every second: a Markdown update rebuilds
        its widgets, the costliest redraw of the app."""
        signature = f"{key}\0{text}"
        if signature == self._shown:
            return
        now = time.monotonic()
        if self._live and key is not None and key == self._shown_key and now - self._shown_at < MARKDOWN_EVERY:
            return
        markdown = self.query_one("#fd-markdown", Markdown)
        same_finding = key is not None and key == self._shown_key and self._shown_text is not None
        if not (same_finding and patch_markdown(markdown, self._shown_text or "", text)):
            markdown.update(text)
        self._shown = signature
        self._shown_key = key
        self._shown_text = text
        self._shown_at = now


def patch_markdown(markdown: Markdown, old: str, new: str) -> bool:
    """Show ``new`` in place of ``old`` by changing only the paragraphs and headings that
    differ (a finding's figures moved); False when the shape changed, and the caller
    rebuilds the document. A rebuild removes and mounts every block, laying the screen
    out again each time (~0.1-0.3 s of the parent's CPU for one finding); a patch is a
    text update of one or two blocks, as Textual's own streaming ``append`` does."""
    from textual.widgets._markdown import MarkdownBlock, MarkdownHeader, MarkdownParagraph

    try:
        if getattr(markdown.lock, "is_locked", True) or getattr(markdown, "_parser_factory", None) is not None:
            # a rebuild under way (it would put its own text back), or a parser of its own
            return False
        from markdown_it import MarkdownIt

        fresh = list(markdown._parse_markdown(MarkdownIt("gfm-like").parse(new)))
        shown = [child for child in markdown.children if isinstance(child, MarkdownBlock)]
        if len(fresh) != len(shown) or not shown:
            return False
        old_lines, new_lines = old.splitlines(keepends=True), new.splitlines(keepends=True)
        changed = []
        for block, replacement in zip(shown, fresh, strict=True):
            if type(block) is not type(replacement):
                return False
            if _source(old_lines, block.source_range) == _source(new_lines, replacement.source_range):
                continue
            leaf = isinstance(block, (MarkdownParagraph, MarkdownHeader))
            if not leaf or block._blocks or replacement._blocks or block.children:
                return False
            changed.append((block, replacement))
        markdown._markdown = new  # what ``markdown.source`` says
        for block, replacement in zip(shown, fresh, strict=True):  # same length: checked above
            block.source_range = replacement.source_range
        for block, replacement in changed:
            block.set_content(replacement._content)
            block._copy_context(replacement)
        return True
    except Exception:  # noqa: BLE001 - Textual's internals moved: rebuild as before
        return False


def _source(lines: list[str], span: tuple[int, int]) -> str:
    start, end = span
    return "".join(lines[start:end])
