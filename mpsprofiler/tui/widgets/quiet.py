"""Update a Static only when what it shows changed, and lay out only when its shape did.

A live panel is redrawn every second with figures that mostly stay the same; each
``Static.update`` repaints, and by default also lays the whole screen out again, which
costs the parent process more than anything else it does. Content is compared by a
fingerprint (text and styles of Rich ``Text`` and ``Table`` cells); a relayout is asked
for only when a cell's length or the number of rows changed (a same-length number does
not move anything).
"""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from textual.widgets import Static


def fingerprint(content: Any) -> tuple[Any, Any] | None:
    """(what it shows, its shape) of ``content``; None when it cannot be compared."""
    if isinstance(content, str):
        return content, len(content)
    if isinstance(content, Text):
        return (content.plain, tuple((s.start, s.end, str(s.style)) for s in content.spans), content.style), \
            (len(content.plain), content.plain.count("\n"))
    if isinstance(content, Table):
        cells = []
        shape = [content.row_count, str(content.title or "")]
        for column in content.columns:
            column_cells = []
            for cell in column._cells:
                part = fingerprint(cell)
                if part is None:
                    return None
                column_cells.append(part[0])
                shape.append(part[1])
            cells.append((str(column.header), tuple(column_cells)))
        return (tuple(cells), tuple(str(row.style) for row in content.rows)), tuple(shape)
    return None


def quiet_update(widget: Static, content: Any) -> bool:
    """``widget.update(content)`` unless it already shows the same; True when updated."""
    print_ = fingerprint(content)
    last = getattr(widget, "_quiet_print", None)
    if print_ is not None and last is not None and print_[0] == last[0]:
        return False
    layout = print_ is None or last is None or (print_[1] != last[1] and not fixed_size(widget))
    widget._quiet_print = print_  # type: ignore[attr-defined]
    widget.update(content, layout=layout)
    return True


def fixed_size(widget: Static) -> bool:
    """Neither dimension follows the content (``height: 1fr``, a width not ``auto``): new
    content never moves anything, however long it is (the Overview's latest output)."""
    width, height = widget.styles.width, widget.styles.height
    return (width is None or not width.is_auto) and height is not None and not height.is_auto
