"""Memory: the series over time, current and peak figures, the limit and the headroom.

On a Mac the device memory is the machine's memory: the headroom that matters is the
allocator's limit (high watermark x recommended working set) and what the system still
has available, so both are shown next to each other.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widget import Widget
from textual.widgets import Static

from ...devices.mps_rules import limit_text
from ...units import fmt_bytes
from ..chart_series import FROM_ZERO, memory_series, system_series, time_range
from ..state import RunState
from .charts import LineChart
from .quiet import quiet_update


class MemoryPanel(Widget):
    DEFAULT_CSS = """
    MemoryPanel { layout: vertical; }
    MemoryPanel #mem-chart { height: 3fr; }
    MemoryPanel #mem-system { height: 2fr; }
    MemoryPanel #mem-bottom { height: auto; }
    MemoryPanel .box { border: round $primary 40%; border-title-color: $text-accent; padding: 0 1; height: auto; }
    MemoryPanel #mem-table { width: 3fr; }
    MemoryPanel #mem-limits { width: 2fr; min-width: 40; }
    """

    def compose(self) -> ComposeResult:
        yield LineChart("Memory of the training", xlabel="seconds", empty="waiting for memory samples…", id="mem-chart")
        yield LineChart("System memory", xlabel="seconds", empty="waiting for memory samples…", id="mem-system")
        with Horizontal(id="mem-bottom"):
            table = Static(id="mem-table", classes="box")
            table.border_title = "Now and peak"
            yield table
            limits = Static(id="mem-limits", classes="box")
            limits.border_title = "Limit and headroom"
            yield limits

    def update_state(self, state: RunState) -> None:
        session = state.session
        # the charts' own data: memory samples (every 0.5-2 s), not every step batch
        key = (*state.view_key[:2], session.memory.samples)
        xs, lines, unit = memory_series(session)
        chart = self.query_one("#mem-chart", LineChart)
        chart.chart_title = f"Memory of the training, {unit}"
        span = time_range(session)  # both charts: one time line, one x range
        chart.set_data(xs, lines, ylim=FROM_ZERO, xlim=span, key=key)
        xs, lines, unit, limits = system_series(session)
        system = self.query_one("#mem-system", LineChart)
        system.chart_title = f"System memory, {unit} (axis: 0 to the machine's total)"
        system.set_data(xs, lines, ylim=limits, xlim=span, key=key)
        quiet_update(self.query_one("#mem-table", Static), memory_table(state))
        quiet_update(self.query_one("#mem-limits", Static), limits_table(state))


def memory_table(state: RunState) -> Table:
    mem = state.session.memory
    last = mem.last
    table = Table(box=None, padding=(0, 0, 0, 1), pad_edge=False, expand=True, header_style="bold")
    # numbers first: on a narrow terminal the labels wrap, the figures stay whole
    table.add_column("", style="dim", overflow="fold")
    table.add_column("now", justify="right", no_wrap=True, min_width=9)
    table.add_column("peak", justify="right", no_wrap=True, min_width=9)
    table.add_column("at start", justify="right", no_wrap=True, min_width=9)
    first = mem.first
    rows = (
        ("device allocated", "allocated", mem.peak_allocated),
        ("driver / cache", "cached", mem.peak.get("cached")),
        ("RSS training", "rss", mem.peak.get("rss")),
        ("RSS workers", "rss_children", mem.peak.get("rss_children")),
        ("RSS total", "rss_total", mem.peak.get("rss_total")),
        ("swap used", "swap_used", mem.peak.get("swap_used")),
    )
    for label, attr, peak in rows:
        now = getattr(last, attr) if last is not None else None
        start = getattr(first, attr) if first is not None else None
        if now is None and peak is None:
            continue
        table.add_row(label, fmt_bytes(now), fmt_bytes(peak), fmt_bytes(start))
    if last is not None and last.workers is not None:
        table.add_row("workers", str(last.workers), "", "")
    if last is None:
        table.add_row("no samples yet", "", "", "")
    return table


def limits_table(state: RunState) -> Table:
    mem = state.session.memory
    table = Table.grid(padding=(0, 2), expand=True)
    table.add_column(style="dim", no_wrap=True)
    table.add_column(justify="right", overflow="fold")
    peak_device = mem.peak_allocated
    if mem.device_limit:
        # MPS: torch's own name for it (the OOM message's "max allowed")
        table.add_row("max allowed" if state.session.device_kind == "mps" else "device limit",
                      fmt_bytes(mem.device_limit))
        if peak_device is not None:
            headroom = mem.device_limit - max(peak_device, mem.peak.get("cached") or 0)
            style = "red" if headroom < 0.1 * mem.device_limit else "green"
            table.add_row("headroom at peak", Text(fmt_bytes(headroom), style=style))
    if state.session.device_kind == "mps":
        # torch's own terms: the OOM message's "max allowed" and the ratios behind it
        pyenv = state.session.env.get("pytorch_env")
        env = {str(k): str(v) for k, v in pyenv.items()} if isinstance(pyenv, dict) else {}
        for label, text in limit_text(env, mem.device_total, fmt_bytes):
            table.add_row(label, text)
    elif mem.device_total:
        table.add_row("device total", fmt_bytes(mem.device_total))
    if mem.sys_total:
        table.add_row("system total", fmt_bytes(mem.sys_total))
    if mem.min_sys_available is not None:
        share = mem.min_sys_available / mem.sys_total if mem.sys_total else None
        style = "red" if share is not None and share < 0.1 else ("yellow" if share is not None and share < 0.2 else "green")
        table.add_row("available, lowest", Text(fmt_bytes(mem.min_sys_available), style=style))
    if not mem.device_limit and state.session.device_kind == "cpu":
        table.add_row("device limit", Text("none (CPU run)", style="dim"))
    return table
