"""``mpsprof compare`` in the terminal: two runs' figures side by side, ratios on the right."""

from __future__ import annotations

from typing import Any

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Static


class CompareApp(App[None]):
    TITLE = "mpsprof compare"
    CSS = """
    #names { padding: 0 1; height: auto; color: $text-muted; }
    #caution { padding: 0 1; height: auto; color: $text-muted; }
    DataTable { height: 1fr; }
    """
    BINDINGS = [Binding("q", "quit", "Quit"), Binding("escape", "quit", "Quit", show=False)]

    def __init__(self, a_name: str, b_name: str, rows: list[Any], caution: str = "", note: str = "") -> None:
        super().__init__()
        self.a_name, self.b_name, self.rows, self.caution, self.note = a_name, b_name, rows, caution, note

    def compose(self) -> ComposeResult:
        from rich.text import Text

        names = f"A: {self.a_name}\nB: {self.b_name}"
        # runs of different length: said above the table, where the ratios are read
        yield Static(Text(names + (f"\n{self.note}" if self.note else "")), id="names")
        table: DataTable[Any] = DataTable(zebra_stripes=True, cursor_type="row")
        table.add_columns("Figure", "A", "B", "B / A")
        for r in self.rows:
            # plain Text cells: a run's script name or path is never read as markup
            table.add_row(Text(r.label), Text(r.a), Text(r.b), Text(r.ratio, justify="right"))
        yield table
        yield Static(Text(self.caution), id="caution")
        yield Footer()


def run_compare_tui(a_name: str, b_name: str, rows: list[Any], caution: str = "", note: str = "") -> None:
    CompareApp(a_name, b_name, rows, caution, note).run()
