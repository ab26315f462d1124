"""Overview: step time, memory and CPU charts beside the key figures and top findings."""

from __future__ import annotations

from rich.cells import cell_len
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import OptionList, Static

from ...session.exit_words import exited_by_itself
from ...session.warmup import warmup_cost
from ...units import fmt_bytes, fmt_pct, fmt_seconds
from ..chart_series import FROM_ZERO, cpu_series, memory_series, step_series, step_title, time_range
from ..messages import ShowFinding
from ..safe import fmt_count, raw
from ..state import RunState
from .charts import LineChart
from .findings_list import FindingsList
from .quiet import quiet_update

TOP_FINDINGS = 6


class OverviewPanel(Widget):
    DEFAULT_CSS = """
    OverviewPanel { layout: horizontal; }
    OverviewPanel #ov-charts { width: 2fr; }
    OverviewPanel #ov-side { width: 1fr; min-width: 34; max-width: 60; padding-left: 1; }
    OverviewPanel #ov-step { height: 5fr; }
    OverviewPanel #ov-mem { height: 4fr; }
    OverviewPanel #ov-cpu { height: 3fr; min-height: 8; }
    OverviewPanel .box { border: round $primary 40%; border-title-color: $text-accent; }
    OverviewPanel #ov-figures { height: auto; padding: 0 1; }
    OverviewPanel #ov-findings-box { height: auto; max-height: 50%; }
    OverviewPanel #ov-findings { height: auto; max-height: 100%; }
    OverviewPanel #ov-output { height: 1fr; padding: 0 1; color: $text-muted; }
    """

    def compose(self) -> ComposeResult:
        with Vertical(id="ov-charts"):
            yield LineChart("Step time, ms", xlabel="step", integer_x=True, empty="waiting for the first steps…", id="ov-step")
            yield LineChart("Memory", xlabel="seconds", empty="waiting for memory samples…", id="ov-mem")
            yield LineChart("CPU, % of one core", xlabel="seconds", empty="waiting for CPU samples…", id="ov-cpu")
        with Vertical(id="ov-side"):
            figures = Static(id="ov-figures", classes="box")
            figures.border_title = "At a glance"
            _no_links(figures)
            yield figures
            box = Vertical(id="ov-findings-box", classes="box")
            box.border_title = "Top findings"
            with box:
                yield FindingsList(compact=True, id="ov-findings")
                yield Static("", id="ov-findings-empty")
            output = Static("", id="ov-output", classes="box")
            output.border_title = "Latest output"
            _no_links(output)
            yield output

    def update_state(self, state: RunState) -> None:
        session = state.session
        version = state.view_key
        xs, lines, _unit = step_series(session)
        chart = self.query_one("#ov-step", LineChart)
        chart.chart_title = step_title(session)
        waiting = no_steps_text(state)
        if chart.empty != waiting:
            chart.empty = waiting
            chart.refresh()
        chart.set_data(xs, lines, ylim=FROM_ZERO, key=version)
        # memory and CPU: one time line, one x range, redrawn when a sample came (every
        # 0.5-2 s), not with every batch of steps
        samples = (*version[:2], session.memory.samples)
        mem = self.query_one("#ov-mem", LineChart)
        cpu = self.query_one("#ov-cpu", LineChart)
        if mem.key != samples or cpu.key != samples:
            span = time_range(session)
            xs, lines, unit = memory_series(session)
            mem.chart_title = f"Memory of the training, {unit}"
            mem.set_data(xs, lines, ylim=FROM_ZERO, xlim=span, key=samples)
            xs, lines = cpu_series(session)
            cpu.set_data(xs, lines, ylim=FROM_ZERO, xlim=span, key=samples)
        figures = self.query_one("#ov-figures", Static)
        quiet_update(figures, figures_table(state, figures.content_size.width))
        top = state.findings[:TOP_FINDINGS]
        self.query_one("#ov-findings", FindingsList).set_findings(top, throttle=state.running)
        empty = self.query_one("#ov-findings-empty", Static)
        empty.display = not top
        self.query_one("#ov-findings", FindingsList).display = bool(top)
        if not top:
            quiet_update(empty, Text("Diagnosis runs every second…" if state.running else "No problems found ✔", style="dim" if state.running else "green"))
        self._show_output(state)

    def _show_output(self, state: RunState) -> None:
        box = self.query_one("#ov-output", Static)
        buffer = state.output
        if buffer is None or not len(buffer):
            quiet_update(box, Text("no output yet" if state.running else "no output recorded", style="dim"))
            return
        rows = max(1, box.content_size.height or 20)
        lines = [buffer.line(i) for i in range(max(0, len(buffer) - rows), len(buffer))]
        quiet_update(box, Text.from_ansi("\n".join(lines), no_wrap=True, overflow="ellipsis"))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id:
            self.post_message(ShowFinding(event.option.id))


def no_steps_text(state: RunState) -> str:
    """What the step chart says before (or without) steps: a run that ended without one
    says how it ended, never "waiting"."""
    if state.running or state.status == "incomplete":
        return "waiting for the first steps…"
    if state.status == "crashed":
        ex = state.session.exit
        if ex is not None and exited_by_itself(ex.returncode, ex.signal_name, state.session.crash):
            return f"no steps: the script exited (status {ex.returncode}) before its first step"
        return "no steps: the script crashed before its first step (see Top findings)"
    if state.status == "stopped":
        return "no steps: stopped before the first step"
    if state.session.recording_problems():
        return "no steps recorded: the events that counted them never arrived (see Environment)"
    return "no steps: no optimizer step, backward pass, DataLoader batch or mpsprofiler.step() seen"


def _no_links(widget: Widget) -> None:
    """Figures and program output hold no action links (``@click``): without this,
    Textual copies each of their strips at every repaint to style links."""
    widget.set_reactive(Widget.auto_links, False)


def figures_table(state: RunState, width: int = 0) -> Table | Text:
    """The key figures as label / value rows: pre-padded text when every row fits in
    ``width`` (what the Overview shows each second: a Rich table, measured and laid out
    again at every repaint, cost the parent several times more), else a table whose
    long values wrap in their own column (an 80-column terminal's device peak)."""
    rows = figure_rows(state)
    label_w = max(len(label) for label, _ in rows)
    if width > 0 and all(label_w + GAP + cell_len(value) <= width and value.isprintable() for _, value in rows):
        value_w = max(cell_len(value) for _, value in rows)
        text = Text(no_wrap=True, overflow="crop", end="")
        for k, (label, value) in enumerate(rows):
            if k:
                text.append("\n")
            text.append(label.ljust(label_w) + " " * GAP, "dim")
            text.append(value + " " * (value_w - cell_len(value)))
        return text
    table = Table.grid(padding=(0, 1))
    table.add_column(style="dim", no_wrap=True)
    table.add_column(overflow="fold")
    for label, value in rows:
        table.add_row(label, raw(value))
    return table


GAP = 1
"""Cells between a label and its value, as in the table (a grid's padding of 1)."""


def figure_rows(state: RunState) -> list[tuple[str, str]]:
    """(label, value) rows: short, the figure first, so they fit the 28 columns of an
    80x24 terminal. Values are plain text (a parameter's dtype is the script's)."""
    session = state.session
    steps = session.steps
    mem = session.memory
    rows = [
        ("steps", f"{steps.count}"),
        ("step p50", fmt_seconds(steps.quantile(0.5))),
        ("step p90", fmt_seconds(steps.quantile(0.9))),
        ("data wait", fmt_pct(steps.data_wait_share())),
    ]
    busy = session.health.busy_share(steps.quantile(0.5))
    if busy is not None:  # device busy time on timed steps (probe/device_time.py), CUDA and MPS
        rows.append(("device busy", fmt_pct(busy)))
    if steps.warmup:
        rows.append(("warm-up", f"{fmt_seconds(warmup_cost(session))} extra"))
    peak_dev = mem.peak_allocated
    if peak_dev is not None:
        rows.append(("device peak", fmt_bytes(peak_dev) + (f" / {fmt_bytes(mem.device_limit)}" if mem.device_limit else "")))
    if mem.peak.get("rss_total") is not None:
        rows.append(("RSS peak", fmt_bytes(mem.peak.get("rss_total"))))
    if mem.min_sys_available is not None:
        rows.append(("free min", fmt_bytes(mem.min_sys_available)))
    model = session.model
    if model.get("parameters"):
        dtypes = model.get("dtypes") or []
        dtype_text = ", ".join(str(d) for d in dtypes) if isinstance(dtypes, list) else str(dtypes)
        rows.append(("params", f"{fmt_count(model['parameters'])} {dtype_text}"))
    return rows
