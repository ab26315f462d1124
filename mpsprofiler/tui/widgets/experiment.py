"""The experiment panel: ``mpsprof try`` of the selected finding's fix, beside the panels.

Docked on the right while an experiment runs (progress, one line per run) and after it
(the verdict, step time and memory before/after, loss). Every text is a plain ``Text``:
script paths and output are never read as markup.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static


class ExperimentPanel(VerticalScroll):
    DEFAULT_CSS = """
    ExperimentPanel {
        dock: right;
        width: 50;
        border-left: solid $accent;
        padding: 0 1;
        background: $surface;
    }
    """

    def __init__(self, **kwargs: Any) -> None:
        self.body = Static()
        super().__init__(self.body, **kwargs)
        self.title = ""
        self.lines: list[str] = []
        self.result_text = ""
        self._good: bool | None = None

    def start(self, title: str, note: str) -> None:
        self.title, self.lines, self.result_text = title, [note, ""], ""
        self._show()

    def add_line(self, text: str) -> None:
        self.lines = (self.lines + [text.strip()])[-30:]
        self._show()

    def finish(self, text: str, good: bool | None) -> None:
        self.result_text, self._good = text.strip(), good
        self._show()

    def show_stored(self, headlines: list[str]) -> None:
        self.title = "Tried fixes (stored with this run)"
        self.lines = [f"• {h}" for h in headlines]
        self._show()

    def _show(self) -> None:
        text = Text()
        text.append(self.title + "\n\n", style="bold")
        text.append("\n".join(self.lines))
        if self.result_text:
            style = "bold green" if self._good else ("bold yellow" if self._good is None else "bold red")
            first, _, rest = self.result_text.partition("\n")
            text.append("\n\n" + first + "\n", style=style)
            text.append(rest)
        self.body.update(text)
        if self.is_mounted:
            self.scroll_end(animate=False)
