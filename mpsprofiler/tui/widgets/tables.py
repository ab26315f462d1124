"""A DataTable whose ``home`` / ``end`` go to the first / last row, as in every other pane
(Textual's own move sideways to the first / last column: a table of rows read top to
bottom would never reach its end with the keys a user tries first)."""

from __future__ import annotations

from typing import Any

from textual.binding import Binding
from textual.widgets import DataTable


class RowTable(DataTable[Any]):
    BINDINGS = [
        Binding("home", "scroll_top", "Top", show=False),
        Binding("end", "scroll_bottom", "Bottom", show=False),
    ]
