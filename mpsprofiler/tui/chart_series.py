"""Session -> chart series: what the Overview, Memory and Data panels plot, and the
series type (:class:`Line`) and colours the chart widget draws.

Pure functions (no widgets), so the choices (skip warm-up steps, which memory figures
share an axis, units) are made once and tested without a terminal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..session.session import Session
from ..session.warmup import between, framework_warmup
from ..units import chart_bytes_unit

# colours that read well on dark and light themes
BLUE = (97, 175, 239)
ORANGE = (229, 152, 75)
GREEN = (152, 195, 121)
MAGENTA = (198, 120, 221)
RED = (224, 108, 117)
GREY = (150, 150, 150)
CYAN = (86, 182, 194)


YLimits = tuple["float | None", "float | None"]


@dataclass
class Line:
    label: str
    values: Sequence[float | None]
    color: tuple[int, int, int] = BLUE
    fill: bool = False
    """An area, stacked on the areas before it (the step chart: data wait, then the rest)."""


def step_series(session: Session) -> tuple[list[float], list[Line], str]:
    """Step time in ms as two stacked areas, data wait below and the rest of the step
    (compute, optimizer, syncs) on top: their sum is the step, as in the HTML report's
    chart; warm-up steps are left out (they dwarf the rest)."""
    steps = session.steps
    warmup = steps.warmup
    points = [p for p in steps.chart.points() if p.i >= warmup]
    xs = [float(p.i) for p in points]
    lines = [
        Line("data wait", [min(p.wait, p.dur) * 1e3 for p in points], ORANGE, fill=True),
        Line("rest of step", [max(0.0, p.dur - p.wait) * 1e3 for p in points], BLUE, fill=True),
    ]
    return xs, lines, "ms"


def step_title(session: Session) -> str:
    """The chart starts after the steady steps' start; its title counts the warm-up as the
    long-warmup finding does, and says what the other steps left out were."""
    if not session.steps.warmup:
        return "Step time, ms"
    warmup = framework_warmup(session)
    apart, sampled = between(session)
    words = f"after {warmup} warm-up step{'s' if warmup != 1 else ''}"
    if apart:
        words += f" and {apart} " + ("sampled by mpsprof" if sampled >= apart else "more")
    return f"Step time, ms ({words})"


def time_range(session: Session) -> tuple[float, float] | None:
    """The x range the memory and CPU charts share (seconds of the run)."""
    points = session.memory.series.points()
    if not points:
        return None
    return (points[0].ts, max(points[-1].ts, points[0].ts + 1.0))


FROM_ZERO: YLimits = (0.0, None)
"""Axes start at zero: a 2% wobble must not look like a cliff."""


def _unit(largest: float) -> tuple[float, str]:
    return chart_bytes_unit(largest)


def _scaled(values: list[int | None], scale: float) -> list[float | None]:
    return [None if v is None else v / scale for v in values]


def memory_series(session: Session) -> tuple[list[float], list[Line], str]:
    """The training's own memory: device allocated, driver/cache, RSS with workers."""
    points = session.memory.series.points()
    largest = max([v for p in points for v in (p.allocated, p.cached, p.rss_total) if v is not None] or [0])
    scale, unit = _unit(largest)
    lines = [
        Line("device allocated", _scaled([p.allocated for p in points], scale), MAGENTA),
        Line("driver / cache", _scaled([p.cached for p in points], scale), RED),
        Line("RSS + workers", _scaled([p.rss_total for p in points], scale), GREEN),
    ]
    return [p.ts for p in points], lines, unit


def system_series(session: Session) -> tuple[list[float], list[Line], str, YLimits]:
    """System memory available and swap used, from 0 to the machine's total, so the eye
    reads the share of the machine left (unified memory: the GPU's share too)."""
    points = session.memory.series.points()
    total = session.memory.sys_total
    scale, unit = _unit(total or max([p.sys_available or 0 for p in points] or [0]))
    lines = [
        Line("available", _scaled([p.sys_available for p in points], scale), GREY),
        Line("swap used", _scaled([p.swap_used or None for p in points], scale), RED),
    ]
    return [p.ts for p in points], lines, unit, (0.0, total / scale if total else None)


def cpu_series(session: Session) -> tuple[list[float], list[Line]]:
    points = [p for p in session.memory.series.points() if p.cpu_pct is not None]
    return [p.ts for p in points], [Line("CPU %", [p.cpu_pct for p in points], BLUE, fill=True)]


def wait_series(session: Session) -> tuple[list[float], list[Line]]:
    """Per step after warm-up: the share of the step spent waiting for data, in %."""
    points = session.steps.series.points()
    warmup = session.steps.warmup
    points = [p for p in points if p.i >= warmup and p.dur > 0] or [p for p in points if p.dur > 0]
    xs = [float(p.i) for p in points]
    return xs, [Line("data wait", [min(100.0, 100.0 * p.wait / p.dur) for p in points], ORANGE)]


RANK_COLORS = (BLUE, ORANGE, GREEN, MAGENTA, CYAN, RED, GREY, (209, 154, 102))
MAX_RANK_LINES = len(RANK_COLORS)


def rank_wait_series(session: Session, first: int | None = None) -> tuple[list[float], list[Line]]:
    """Data wait per step in ms, one line per rank (steps after each rank's warm-up), for
    at most :data:`MAX_RANK_LINES` ranks: ``first`` (the straggler) and the lowest others."""
    ranks = sorted(session.ranks)
    if first in session.ranks:
        ranks = [first, *(r for r in ranks if r != first)]
    ranks = sorted(ranks[:MAX_RANK_LINES])
    per_rank: dict[int, dict[int, float]] = {}
    for rank in ranks:
        steps = session.ranks[rank].steps
        warmup = steps.warmup
        per_rank[rank] = {p.i: p.wait * 1e3 for p in steps.series.points() if p.i >= warmup}
    xs = sorted({i for waits in per_rank.values() for i in waits})
    lines = [
        Line(f"rank {rank}", [per_rank[rank].get(i) for i in xs], RANK_COLORS[n % len(RANK_COLORS)])
        for n, rank in enumerate(ranks)
    ]
    return [float(x) for x in xs], lines


def rank_step_split(session: Session) -> list[tuple[int, float, float]]:
    """(rank, mean data wait ms, mean rest of the step ms) over each rank's steady steps:
    in DDP the rest includes waiting for the other ranks in the all-reduce."""
    out = []
    for rank, sub in sorted(session.ranks.items()):
        n = sub.steps.steady_count
        if not n:
            continue
        dur, wait = sub.steps.steady_sums()
        wait_ms, dur_ms = wait / n * 1e3, dur / n * 1e3
        out.append((rank, wait_ms, max(0.0, dur_ms - wait_ms)))
    return out
