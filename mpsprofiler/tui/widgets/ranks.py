"""Ranks: every rank of a distributed run side by side, the straggler marked.

In DDP the ranks' step times even out (every rank waits for the slowest inside the
all-reduce), so the table and the bars split each rank's step into its data wait and
the rest: the rank that waits for data while the others wait for it stands out. The
straggler comes from the ``straggler-rank`` finding, so this panel and the Findings
panel always agree. Enter (or a click) on a row shows that rank in every panel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.app import ComposeResult, RenderResult
from textual.widget import Widget
from textual.widgets import DataTable, Static

from ...session.documents import RankRow
from ...session.summary import rank_rows
from ...units import fmt_bytes, fmt_pct, fmt_seconds
from ..chart_series import FROM_ZERO, rank_step_split, rank_wait_series
from ..messages import ShowRank
from ..state import RunState
from .charts import LineChart
from .quiet import quiet_update
from .tables import RowTable

if TYPE_CHECKING:
    from textual.geometry import Size

    from ...diagnosis.findings import Finding

STRAGGLER_RULE = "straggler-rank"
COLUMNS = ("", "rank", "steps", "p50 step", "p90 step", "wait/step", "wait %", "peak mem", "device", "status")
"""Short headers, figures first: at 80 columns the words at the end are what scrolls away."""
STATUS_STYLE = {"finished": "green", "crashed": "bold red", "stopped": "yellow", "running": ""}
WAIT_STYLE = "rgb(229,152,75)"
REST_STYLE = "rgb(97,175,239)"


@dataclass
class Straggler:
    rank: int
    cause: str
    excess_ms: float | None
    share: float | None
    title: str

    def text(self) -> str:
        parts = [f"rank {self.rank} holds the job back ({self.cause})"]
        if self.excess_ms is not None:
            parts.append(f"+{self.excess_ms:.1f} ms per step")
        if self.share is not None:
            parts.append(f"{self.share:.0%} of the job's step")
        return " · ".join(parts)


def find_straggler(findings: list[Finding]) -> Straggler | None:
    """The straggler named by the ``straggler-rank`` finding, if it fired."""
    for f in findings:
        if getattr(f, "rule", None) != STRAGGLER_RULE:
            continue
        facts = getattr(f, "facts", None) or {}
        rank = facts.get("straggler_rank")
        if isinstance(rank, int) and not isinstance(rank, bool):
            return Straggler(rank, str(facts.get("straggler_cause") or "slower"), _float(facts.get("straggler_excess_ms")),
                             _float(facts.get("straggler_share")), str(f.title))
    return None


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def rank_cells(row: RankRow, straggler: Straggler | None, shown: int) -> list[Text]:
    """One row of the table: the shown rank gets ▶, the straggler is bold yellow."""
    is_straggler = straggler is not None and straggler.rank == row["rank"]
    style = "bold yellow" if is_straggler else ""
    wait_share = row["data_wait_share"]
    status = str(row["status"] or "")
    wait = row["data_wait_per_step_s"]
    return [
        Text("▶" if row["rank"] == shown else "", style="bold cyan"),
        Text(f"{row['rank']}" + (" ◀" if is_straggler else ""), style=style),
        Text(str(row["steps"] or 0), style=style),
        Text(fmt_seconds(row["median_s"]), style=style),
        Text(fmt_seconds(row["p90_s"]), style=style),
        Text(fmt_seconds(wait) if wait else ("–" if wait is None else "0 ms"), style=style),
        Text(fmt_pct(wait_share), style="bold yellow" if (wait_share or 0) >= 0.15 else style),
        Text(fmt_bytes(row["peak_memory"]), style=style),
        Text(str(row["device"] or "–"), style="dim" if not is_straggler else style),
        Text(status, style=STATUS_STYLE.get(status, "")),
    ]


def split_bar(wait_ms: float, rest_ms: float, scale: float, width: int) -> Text:
    """``wait + rest`` ms as one bar at ``scale`` ms per cell (at most ``width`` cells):
    the data wait in orange, the rest in blue. Whole cells only: they read the same in
    every terminal font, and at ~100 cells a cell is 1% of the longest step."""
    if scale <= 0:
        return Text()
    total = min(width, round((wait_ms + rest_ms) / scale))
    wait = min(total, round(wait_ms / scale))
    text = Text()
    text.append("█" * wait, style=WAIT_STYLE)
    text.append("█" * (total - wait), style=REST_STYLE)
    return text


class RankSplit(Widget):
    """One bar per rank: its mean steady step, split into data wait and the rest."""

    DEFAULT_CSS = """
    RankSplit { height: auto; border: round $primary 40%; border-title-color: $text-accent;
                border-subtitle-color: $text-muted; padding: 0 1; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.rows: list[tuple[int, float, float]] = []
        self.straggler: int | None = None
        self.border_title = "Mean step per rank: data wait + the rest (DDP: waits for the others too)"
        self.border_subtitle = f"[{WAIT_STYLE}]█[/] data wait  [{REST_STYLE}]█[/] rest of the step"

    def set_rows(self, rows: list[tuple[int, float, float]], straggler: int | None) -> None:
        if (rows, straggler) != (self.rows, self.straggler):
            self.rows, self.straggler = rows, straggler
            self.refresh(layout=True)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return max(1, len(self.rows))

    def render(self) -> RenderResult:
        if not self.rows:
            return Text("waiting for steady steps…", style="dim")
        label_w = max(len(f"rank {r}") for r, _w, _rest in self.rows)
        figures = [f"{w + rest:.1f} ms (wait {w:.1f} ms)" for _r, w, rest in self.rows]
        fig_w = max(len(f) for f in figures)
        width = max(4, self.content_size.width - label_w - fig_w - 4)
        longest = max(w + rest for _r, w, rest in self.rows) or 1.0
        scale = longest / width
        out = Text(no_wrap=True, overflow="crop")
        for n, ((rank, wait, rest), figure) in enumerate(zip(self.rows, figures, strict=True)):
            if n:
                out.append("\n")
            style = "bold yellow" if rank == self.straggler else ""
            out.append(f"rank {rank}".ljust(label_w), style=style)
            out.append(" ")
            bar = split_bar(wait, rest, scale, width)
            out.append_text(bar)
            out.append(" " * (width - bar.cell_len + 1))
            out.append(figure.rjust(fig_w), style=style or "dim")
        return out


class RanksPanel(Widget):
    DEFAULT_CSS = """
    RanksPanel { layout: vertical; }
    RanksPanel #ranks-summary { height: auto; padding: 0 1; }
    RanksPanel #ranks-table { height: auto; max-height: 50%; border: round $primary 40%; border-title-color: $text-accent; }
    RanksPanel #ranks-table:focus { border: round $accent; }
    RanksPanel #ranks-wait { height: 1fr; }
    RanksPanel #ranks-none { height: auto; padding: 1 2; color: $text-muted; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._key: object = None
        self._ranks: list[int] = []
        self._shown: int | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="ranks-summary")
        yield RowTable(id="ranks-table", cursor_type="row", zebra_stripes=True)
        yield RankSplit(id="ranks-split")
        yield LineChart("Data wait per step, ms, by rank", xlabel="step", integer_x=True,
                        empty="waiting for steps…", id="ranks-wait")
        yield Static("single process: no ranks (start the script with --nproc-per-node N to compare ranks)",
                     id="ranks-none")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.border_title = "Ranks"
        table.border_subtitle = "enter: show this rank in every panel"
        for i, name in enumerate(COLUMNS):
            table.add_column(name, key=str(i))

    def update_state(self, state: RunState) -> None:
        job = state.job
        straggler = find_straggler(state.findings)
        shown = state.shown_rank
        distributed = bool(job.ranks) and state.distributed
        for selector in ("#ranks-summary", "#ranks-table", "#ranks-split", "#ranks-wait"):
            self.query_one(selector).display = distributed
        self.query_one("#ranks-none").display = not distributed
        if not distributed:
            return
        key = (job.version, state.findings_version, shown)
        if key == self._key:
            return
        self._key = key
        quiet_update(self.query_one("#ranks-summary", Static), summary_text(state, straggler))
        self._fill(rank_rows(job), straggler, shown)
        self.query_one(RankSplit).set_rows(rank_step_split(job), straggler.rank if straggler else None)
        xs, lines = rank_wait_series(job, straggler.rank if straggler else None)
        self.query_one("#ranks-wait", LineChart).set_data(xs, lines, ylim=FROM_ZERO, key=job.version)

    def _fill(self, rows: list[RankRow], straggler: Straggler | None, shown: int) -> None:
        table = self.query_one(DataTable)
        cursor = table.cursor_row
        table.clear()
        self._ranks = [row["rank"] for row in rows]
        for row in rows:
            table.add_row(*rank_cells(row, straggler, shown), key=str(row["rank"]))
        if shown != self._shown and shown in self._ranks:
            cursor = self._ranks.index(shown)  # another rank picked (r, palette): follow it
        self._shown = shown
        if rows:
            table.move_cursor(row=min(max(cursor, 0), len(rows) - 1))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(ShowRank(int(event.row_key.value)))


def summary_text(state: RunState, straggler: Straggler | None) -> Text:
    job = state.job
    text = Text()
    world = state.world
    text.append(f"{len(job.ranks)} rank{'s' if len(job.ranks) != 1 else ''}", style="bold")
    if world > len(job.ranks):
        text.append(f" of {world} reporting")
    text.append(f" · the other panels show {state.rank_name()}")
    text.append("  (r / R, or enter on a row, to change)", style="dim")
    text.append("\n")
    if straggler is not None:
        text.append("▲ ", style="bold yellow")
        text.append(straggler.text(), style="bold yellow")
    elif state.running:
        text.append("no straggler so far (the straggler rule waits for enough steady steps)", style="dim")
    else:
        text.append("no straggler: the ranks keep pace with each other", style="green")
    return text
