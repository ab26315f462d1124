"""Ops: CPU fallbacks, MPS readiness, host-device syncs, float64 and placement, sortable.

Rows come from ``session.ops.to_dict()`` (op accounting of sampled steps). Problems are
listed first (what would fall back on a Mac, syncs, float64 sites, modules whose
parameters sit on another device than their input), then every op seen. The highlighted
row's source line is shown under the table.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widget import Widget
from textual.widgets import DataTable, Static

from ...units import ordinal
from ..state import RunState
from .quiet import quiet_update
from .tables import RowTable

COLUMNS = ("kind", "op", "calls/step", "host ms/step", "module", "where", "devices · dtypes")
"""Figures right after the op: a narrow terminal scrolls the table sideways, and what
is cut off first should be words, not numbers."""
TABLE_EVERY = 5.0
"""Seconds between refills of a live run's table when only its figures moved (new rows
or a finished run refill at once)."""
KIND_STYLE = {
    "CPU fallback": "bold red",
    "no MPS kernel": "bold yellow",
    "sync": "yellow",
    "sync on Mac": "yellow",
    "float64": "magenta",
    "placement": "bold red",
    "op": "dim",
}
KIND_ORDER = {name: i for i, name in enumerate(KIND_STYLE)}


@dataclass
class OpLine:
    kind: str
    op: str
    module: str
    file: str
    line: int
    calls_per_step: float | None
    host_ms: float | None
    detail: str
    code: str = ""

    def sort_value(self, column: int) -> Any:
        values = (
            KIND_ORDER.get(self.kind, 99), self.op, -(self.calls_per_step or 0.0), -(self.host_ms or 0.0),
            self.module, (self.file, self.line), self.detail,
        )
        return values[column]


def op_lines(ops: dict[str, Any]) -> list[OpLine]:
    """Flatten ``OpStats.to_dict()`` into one table, problems first."""
    on_mps = ops.get("device_kind") == "mps" or str(ops.get("model_device") or "").startswith("mps")
    lines: list[OpLine] = []
    for r in ops.get("mps_kernel") or []:
        lines.append(OpLine("CPU fallback" if on_mps else "no MPS kernel", str(r.get("op", "")), str(r.get("module", "")),
                            str(r.get("file", "")), int(r.get("line") or 0), r.get("calls_per_step"),
                            r.get("host_ms_per_step"), _devices(r)))
    for s in ops.get("syncs") or []:
        kind = "sync on Mac" if s.get("predicted") else "sync"
        lines.append(OpLine(kind, sync_words(str(s.get("kind", "")), str(s.get("op", ""))), str(s.get("module", "")),
                            str(s.get("file", "")), int(s.get("line") or 0), s.get("calls_per_step"), None,
                            "", str(s.get("code") or "")))
    for site in (ops.get("float64") or {}).get("sites") or []:
        lines.append(OpLine("float64", str(site.get("op", "")), str(site.get("module", "")), str(site.get("file", "")),
                            int(site.get("line") or 0), None, None, f"{site.get('calls', 0)} calls",
                            str(site.get("code") or "")))
    for m in ops.get("mismatch") or []:
        lines.append(OpLine("placement", "", str(m.get("module", "")), "", 0, None, None,
                            f"params on {m.get('param_device')}, input on {m.get('input_device')}"))
    for r in ops.get("ops") or []:
        lines.append(OpLine("op", str(r.get("op", "")), str(r.get("module", "")), str(r.get("file", "")),
                            int(r.get("line") or 0), r.get("calls_per_step"), r.get("host_ms_per_step"), _devices(r)))
    return lines


SYNC_WORDS = {"item": ".item()", "scalar": "float(t)/int(t)", "tolist": ".tolist()",
              "to_cpu": ".cpu()", "print": "print(tensor)"}
"""What the script wrote for each kind of sync the probe reports (its words, not torch's op)."""
PREDICTED_NOTE = ("a Mac GPU would wait here for the GPU to finish; on this run's device it costs little "
                  "(see the finding)")


def sync_words(kind: str, op: str) -> str:
    """``.item() → aten::_local_scalar_dense``: the call in the script first, then torch's op."""
    words = SYNC_WORDS.get(kind, kind)
    return f"{words} → {op}" if words and op else (words or op)


def _devices(row: dict[str, Any]) -> str:
    return " · ".join(p for p in (",".join(row.get("devices") or []), ",".join(row.get("dtypes") or [])) if p)


def short_path(file: str, cwd: str | None) -> str:
    if not file:
        return ""
    if cwd and file.startswith(cwd.rstrip(os.sep) + os.sep):
        return file[len(cwd.rstrip(os.sep)) + 1 :]
    parts = file.split(os.sep)
    return os.sep.join(parts[-2:]) if len(parts) > 2 else file


OP_WIDTH = 28
"""Op names are cut to this many characters in the table (the line below the table
names the selected op in full), so the figures fit an 80-column terminal."""


def _short(op: str, width: int = OP_WIDTH) -> str:
    return op if len(op) <= width else op[: max(1, width - 1)].rstrip() + "…"


CELL_PADDING = 2
"""Cells around each column's text (DataTable's ``cell_padding`` of 1 on each side)."""
OP_MIN = 15
"""What the op column keeps at the least when the table is narrow."""
ATEN = "aten::"


def op_text(op: str, narrow: bool) -> str:
    """The op as the table shows it: without ``aten::`` where the width is short (the line
    under the table names the selected op in full)."""
    return op.replace(ATEN, "") if narrow else op


def column_widths(width: int, lines: list[OpLine]) -> tuple[int, int, bool]:
    """(op, module) text widths for a table ``width`` cells wide, by priority, and whether
    the ops lose their ``aten::``: the kind and the figures whole, then the op (up to
    :data:`OP_WIDTH`), then the module; when the module would not fit whole, the ops drop
    ``aten::`` and the op column gives cells back down to :data:`OP_MIN`. ``where`` and the
    rest follow (the table scrolls sideways to them)."""
    longest_module = max((len(line.module or "–") for line in lines), default=6)
    kind = max([len(COLUMNS[0]), *(len(line.kind) for line in lines)])
    figures = len(COLUMNS[2]) + len(COLUMNS[3]) + 2  # + the sort arrow
    free = width - kind - figures - 4 * CELL_PADDING
    narrow = False
    for narrow in (False, True):
        longest_op = max((len(op_text(line.op, narrow)) for line in lines), default=2)
        op = min(OP_WIDTH, max(longest_op, len(COLUMNS[1])))
        if op + longest_module <= free:
            return op, max(len(COLUMNS[4]), longest_module), narrow
    op = max(OP_MIN, free - longest_module)
    return op, max(len(COLUMNS[4]), min(longest_module, free - op)), narrow


def _num(value: float | None, digits: int = 2) -> str:
    if value is None:
        return ""
    try:
        return f"{value:.{digits}f}"
    except (TypeError, ValueError):  # a recording's odd value: shown as recorded
        return str(value)


class OpsPanel(Widget):
    DEFAULT_CSS = """
    OpsPanel { layout: vertical; }
    OpsPanel #ops-summary { height: auto; padding: 0 1; color: $text-muted; }
    OpsPanel DataTable { height: 1fr; }
    OpsPanel #ops-detail { height: auto; max-height: 6; padding: 0 1; border-top: solid $primary 40%; }
    """
    BINDINGS = [
        Binding("o", "cycle_sort", "Sort"),
        Binding("f", "toggle_all", "Problems / all"),
    ]

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._lines: list[OpLine] = []
        self._shown: list[OpLine] = []
        self._sort_column = 0
        self._reverse = False
        self._problems_only = False
        self._key: tuple[object, ...] | None = None
        self._filled_at = 0.0
        self._cwd: str | None = None
        self._filled_width = 0

    def compose(self) -> ComposeResult:
        yield Static("", id="ops-summary")
        table: DataTable[Text | str] = RowTable(id="ops-table", cursor_type="row", zebra_stripes=True)
        yield table
        yield Static("", id="ops-detail")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for i, name in enumerate(COLUMNS):
            table.add_column(name, key=str(i))

    def update_state(self, state: RunState) -> None:
        session = state.session
        self._cwd = session.run.get("cwd")
        ops = session.ops.to_dict(predict=False)  # mps_predicted is not shown here
        key = (id(session), ops.get("sampled_steps"), len(ops.get("ops") or []), len(ops.get("syncs") or []))
        summary = self.query_one("#ops-summary", Static)
        quiet_update(summary, summary_text(ops, state))
        if key == self._key:
            return
        now = time.monotonic()
        same_rows = self._key is not None and key[0] == self._key[0] and key[2:] == self._key[2:]
        if state.running and same_rows and now - self._filled_at < TABLE_EVERY:
            return  # only the figures moved: a refill rebuilds the table, every few seconds is enough
        self._key = key
        self._filled_at = now
        self._lines = op_lines(ops) if ops.get("sampled_steps") else []
        self._fill()

    def _fill(self) -> None:
        table = self.query_one(DataTable)
        lines = [line for line in self._lines if line.kind != "op"] if self._problems_only else list(self._lines)
        lines.sort(key=lambda line: line.sort_value(self._sort_column), reverse=self._reverse)
        self._shown = lines
        cursor = table.cursor_row
        table.clear()
        width = table.size.width or self.size.width or self.app.size.width - 4  # before the first layout
        self._filled_width = width
        op_w, module_w, narrow = column_widths(width - 2, lines)  # - the vertical scrollbar
        for line in lines:
            table.add_row(
                Text(line.kind, style=KIND_STYLE.get(line.kind, "")),
                Text(_short(op_text(line.op, narrow), op_w)),
                Text(_num(line.calls_per_step), justify="right"),
                Text(_num(line.host_ms, 3), justify="right"),
                Text(_short(line.module, module_w) if line.module else "–", style="cyan" if line.module else "dim"),
                Text(f"{os.path.basename(line.file)}:{line.line}" if line.file else ""),
                Text(line.detail),
            )
        for i, name in enumerate(COLUMNS):
            arrow = (" ▼" if not self._reverse else " ▲") if i == self._sort_column else ""
            table.columns[str(i)].label = Text(name + arrow)  # type: ignore[index]
        if lines:
            table.move_cursor(row=min(max(cursor, 0), len(lines) - 1))
        self._show_detail()

    def on_resize(self) -> None:
        """The column widths follow the terminal's width (see :func:`column_widths`)."""
        if self._lines and self.query_one(DataTable).size.width != self._filled_width:
            self._fill()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        column = int(str(event.column_key.value))
        if column == self._sort_column:
            self._reverse = not self._reverse
        else:
            self._sort_column, self._reverse = column, False
        self._fill()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self._show_detail()

    def action_cycle_sort(self) -> None:
        self._sort_column = (self._sort_column + 1) % len(COLUMNS)
        self._reverse = False
        self._fill()
        self.app.notify(f"sorted by {COLUMNS[self._sort_column]}", timeout=1.5, markup=False)

    def action_toggle_all(self) -> None:
        self._problems_only = not self._problems_only
        self._fill()
        self.app.notify("problems only" if self._problems_only else "all ops", timeout=1.5, markup=False)

    def _show_detail(self) -> None:
        detail = self.query_one("#ops-detail", Static)
        table = self.query_one(DataTable)
        row = table.cursor_row
        if not self._shown or not (0 <= row < len(self._shown)):
            detail.display = False
            return
        line = self._shown[row]
        text = Text()
        text.append(f"{line.kind} ", style=KIND_STYLE.get(line.kind, ""))
        text.append(line.op or "", style="bold")
        if line.module:
            text.append(f"  in {line.module}", style="cyan")
        if line.file:
            text.append(f"\n{short_path(line.file, self._cwd)}:{line.line}", style="dim")
        if line.code:
            text.append(f"\n    {line.code.strip()}", style="green")
        if line.kind == "sync on Mac":
            text.append(f"\n{PREDICTED_NOTE}", style="dim")
        quiet_update(detail, text)  # refilled every few seconds while live: same text, no redraw
        detail.display = True


def summary_text(ops: dict[str, Any], state: RunState) -> Text:
    n = ops.get("sampled_steps") or 0
    if not n:
        if not state.running and state.session.steps.count:
            return Text("op accounting: no sampled steps (switched off with --no-ops, or the run was too short)")
        return Text("op accounting: no sampled steps yet")
    text = Text()
    text.append(f"{n} sampled step{'s' if n != 1 else ''}", style="bold")
    if ops.get("first_step") is not None:
        text.append(f" (steps {ops['first_step']}–{ops['last_step']}")
        every = ops.get("interval")
        nth = ordinal(every) if isinstance(every, int) and not isinstance(every, bool) else str(every)
        text.append(f", every {nth} step)" if every else ")")
    if ops.get("overhead_share") is not None:
        text.append(f" · op accounting took {ops['overhead_share'] * 100:.1f}% of their time (only theirs)")
    text.append("   o sort · f problems/all", style="dim")
    return text
