"""Data: the DataLoader configuration(s), and how long each step waited for its batch."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widget import Widget
from textual.widgets import DataTable, Static

from ...report.common import loader_brief, start_method_text
from ...session.loaders import dataset_text
from ...units import fmt_pct
from ..chart_series import wait_series
from ..state import RunState
from .charts import LineChart
from .quiet import quiet_update
from .tables import RowTable

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ...session.session import Session

LOADER_FIELDS = (
    ("batch_size", "batch size"),
    ("num_workers", "workers"),
    ("prefetch_factor", "prefetch"),
    ("persistent_workers", "persistent"),
    ("pin_memory", "pin memory"),
    ("multiprocessing_context", "start method"),
    ("len", "batches"),
    ("dataset", "dataset"),
)
RECENT_STEPS = 50
TABLE_EVERY = 5.0
"""Seconds between refills of the recent-steps table (a refill re-renders every row)."""


class DataPanel(Widget):
    DEFAULT_CSS = """
    DataPanel { layout: vertical; }
    DataPanel #data-loaders { height: auto; max-height: 10; border: round $primary 40%; border-title-color: $text-accent; }
    DataPanel #data-middle { height: 1fr; }
    DataPanel #data-chart { width: 2fr; }
    DataPanel #data-steps { width: 1fr; min-width: 44; }
    DataPanel #data-share { height: auto; padding: 0 1; }
    DataPanel #data-profile { height: auto; padding: 0 1; color: $text-muted; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._loaders_key: object = None
        self._steps_key: object = None
        self._steps_at = float("-inf")
        self._steps_view = 0
        self._profile_key: object = None
        self._profile_at = float("-inf")
        """id() of the session the steps table shows: another rank refills it at once."""

    def compose(self) -> ComposeResult:
        yield DataTable(id="data-loaders", cursor_type="none", show_cursor=False)
        yield Static("", id="data-share")
        yield Static("", id="data-profile")
        with Horizontal(id="data-middle"):
            yield LineChart("Data wait per step, %", xlabel="step", integer_x=True, empty="waiting for steps…", id="data-chart")
            yield RowTable(id="data-steps", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        loaders = self.query_one("#data-loaders", DataTable)
        loaders.border_title = "DataLoaders"
        loaders.add_column("id", key="id")
        for key, label in LOADER_FIELDS:
            loaders.add_column(label, key=key)
        steps = self.query_one("#data-steps", DataTable)
        for label in ("step", "step ms", "wait ms", "wait %", "batches"):
            steps.add_column(label, key=label)

    def update_state(self, state: RunState) -> None:
        session = state.session
        self._fill_loaders(session)
        steps = session.steps
        share = steps.data_wait_share()
        text = Text()
        text.append("data wait ")
        text.append(fmt_pct(share), style="bold yellow" if share is not None and share >= 0.15 else "bold")
        text.append(" of steady step time")
        if steps.idle_waits or steps.busy_waits:
            text.append(f" · device idle during {steps.idle_waits} of {steps.idle_waits + steps.busy_waits} waits")
        quiet_update(self.query_one("#data-share", Static), text)
        self._fill_profile(session, throttle=state.running)
        xs, lines = wait_series(session)
        self.query_one("#data-chart", LineChart).set_data(xs, lines, ylim=(0.0, 100.0), key=state.view_key)
        self._fill_steps(session, throttle=state.running and self._steps_view == id(session))

    def _fill_profile(self, session: Session, throttle: bool) -> None:
        """What the loader does (waiting, CPU work, ...) with its figures; recomputed at
        most every TABLE_EVERY seconds while the run is live."""
        steps = session.steps
        key = (id(session), steps.count, session.memory.samples)
        now = time.monotonic()
        if key == self._profile_key or (throttle and now - self._profile_at < TABLE_EVERY):
            return
        self._profile_key = key
        self._profile_at = now
        rows = loader_brief(session)
        text = Text("\n".join(rows))
        widget = self.query_one("#data-profile", Static)
        quiet_update(widget, text)
        if widget.display != bool(rows):
            widget.display = bool(rows)

    def _fill_loaders(self, session: Session) -> None:
        dataloaders = session.dataloaders
        key = repr(sorted(dataloaders.items()))
        if key == self._loaders_key:
            return
        self._loaders_key = key
        table = self.query_one("#data-loaders", DataTable)
        table.clear()
        for loader_id, cfg in sorted(dataloaders.items()):
            fields: Mapping[str, Any] = cfg  # read by the names in LOADER_FIELDS
            table.add_row(Text(str(loader_id)), *(_cell(key, dataset_text(cfg) if key == "dataset" else
                                                        start_method_text(session, cfg) if key == "multiprocessing_context"
                                                        else fields.get(key))
                                                  for key, _ in LOADER_FIELDS))
        table.display = bool(dataloaders)

    def _fill_steps(self, session: Session, throttle: bool) -> None:
        steps = session.steps
        key = (id(session), steps.count, steps.series.total)
        now = time.monotonic()
        if key == self._steps_key or (throttle and now - self._steps_at < TABLE_EVERY):
            return
        self._steps_key = key
        self._steps_at = now
        self._steps_view = id(session)
        table = self.query_one("#data-steps", DataTable)
        table.clear()
        points = steps.series.points()[-RECENT_STEPS:]
        warmup = steps.warmup
        for p in reversed(points):
            share = p.wait / p.dur if p.dur > 0 else 0.0
            style = "yellow" if share >= 0.5 else ""
            label = f"{p.i}" + (" w" if p.i < warmup else "")
            table.add_row(Text(label), Text(f"{p.dur * 1e3:.1f}"), Text(f"{p.wait * 1e3:.1f}", style=style),
                          Text(f"{share * 100:.0f}%", style=style), Text(str(p.batches)))


def _cell(key: str, value: object) -> Text:
    if value is None:
        return Text("–", style="dim")
    if isinstance(value, bool):
        return Text("yes" if value else "no", style="green" if value else "")
    if key == "num_workers" and value == 0:
        return Text("0 (main process)", style="bold yellow")
    return Text(str(value))
