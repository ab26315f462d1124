"""The HTML report's charts, drawn from the session's (already thinned) series.

Step time is one bar per step with its DataLoader wait at the bottom, warm-up shaded and
outliers clipped to the steady-state scale (so a slow first step does not flatten the
rest); memory is the process and device lines, and system memory on its own scale.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..session.session import Session
from ..units import chart_bytes_unit, fmt_bytes, fmt_seconds
from . import svg
from .svg import e


def _seconds_unit(hi: float) -> tuple[float, str]:
    """Divisor and suffix that make step times read as round numbers."""
    if hi < 1e-3:
        return 1e-6, "µs"
    if hi < 1:
        return 1e-3, "ms"
    return 1.0, "s"


def _bytes_unit(hi: float) -> tuple[float, str]:
    return chart_bytes_unit(hi)  # one unit policy with the TUI's charts


def _unit_fmt(suffix: str) -> Callable[[float], str]:
    return lambda v: f"{round(v, 6):g} {suffix}"


def _scale_top(durations: list[float]) -> float:
    """The step axis' top: the slowest steady step, unless a few rare spikes would flatten
    the rest; then a little over the 99th percentile (spikes are marked as off scale)."""
    if not durations:
        return 0.0
    slowest = durations[-1]
    p99 = durations[min(len(durations) - 1, int(0.99 * len(durations)))]
    median = durations[len(durations) // 2]
    return min(slowest, max(p99 * 1.25, median * 1.5)) * 1.08


def step_chart(session: Session) -> str:
    points = session.steps.chart.points()
    if not points:
        return ""
    warmup = session.steps.warmup
    steady = [p for p in points if p.i >= warmup] or points
    top = _scale_top(sorted(p.dur for p in steady)) or 1e-3
    unit, suffix = _seconds_unit(top)
    y = svg.axis(0.0, top / unit, _unit_fmt(suffix))
    bars = [svg.Bar(x=p.i, total=p.dur / unit, part=min(max(p.wait, 0.0), p.dur) / unit, muted=p.i < warmup,
                    title=f"step {p.i}: {fmt_seconds(p.dur)}, data wait {fmt_seconds(p.wait)}"
                    + (" (warm-up)" if p.i < warmup else ""))
            for p in points]
    band = (float(points[0].i), float(warmup), "warm-up") if warmup > 0 else None
    chart = svg.bar_chart("Step time and data wait per step", bars, y, "step", lambda v: f"{int(v)}", band)
    clipped = [p for p in points if p.dur / unit > y.hi]
    caption = (f"{len(points)} of {session.steps.count} steps shown"
               + (" (thinned: the slowest step of each stretch)" if len(points) < session.steps.count else "")
               + ". Each bar is one step; the orange part is time spent waiting for the DataLoader.")
    if clipped:
        shown = ", ".join(f"step {p.i} ({fmt_seconds(p.dur)})" for p in clipped[:4])
        more = f" and {len(clipped) - 4} more" if len(clipped) > 4 else ""
        caption += f" Off scale (▲): {shown}{more}."
    legend = svg.legend([("s1", "data wait"), ("s2", "rest of the step (compute, optimizer, sync)")])
    return (f'<div class="chart-box"><h3>Step time</h3><p class="caption">{e(caption)}</p>{chart}{legend}</div>')


def memory_charts(session: Session) -> list[str]:
    points = session.memory.series.points()
    if not points:
        return ['<p class="none">No memory samples were recorded.</p>']
    t0, t1 = points[0].ts, points[-1].ts
    minutes = (t1 - t0) > 600
    scale = 60.0 if minutes else 1.0

    def x_fmt(v: float) -> str:
        return f"{round(v, 3):g}"

    x_label = "minutes since start" if minutes else "seconds since start"

    def series(get: Callable[[Any], Any]) -> list[tuple[float, float]]:
        return [(p.ts / scale, float(v)) for p in points if (v := get(p)) is not None]

    process = [svg.Line("RSS (training process)", "s2", series(lambda p: p.rss))]
    if any(p.rss_children for p in points):
        process.append(svg.Line("RSS incl. DataLoader workers", "s4", series(lambda p: p.rss_total), dashed=True))
    process.append(svg.Line("device allocated (tensors)", "s1", series(lambda p: p.allocated)))
    process.append(svg.Line("device cache / driver total", "s3", series(lambda p: p.cached)))
    out = []
    scaled, suffix = _scaled(process)
    chart = svg.line_chart("Process and device memory", scaled, _unit_fmt(suffix), x_label, x_fmt)
    if chart:
        shown = [ln for ln in process if ln.points]
        caption = f"{len(points)} samples of {session.memory.samples}."
        if session.memory.device_limit:
            caption += f" Device memory limit: {fmt_bytes(session.memory.device_limit)}."
        out.append(f'<div class="chart-box"><h3>Memory</h3><p class="caption">{e(caption)}</p>{chart}'
                   + svg.legend([(ln.css, ln.label) for ln in shown]) + "</div>")
    system = [svg.Line("system available", "s3", series(lambda p: p.sys_available))]
    if any(p.swap_used for p in points):
        system.append(svg.Line("swap used", "s1", series(lambda p: p.swap_used)))
    scaled, suffix = _scaled(system)
    chart = svg.line_chart("System memory", scaled, _unit_fmt(suffix), x_label, x_fmt, height=180)
    if chart:
        total = session.memory.sys_total
        caption = "Memory left for every app on the machine" + (f" (of {fmt_bytes(total)})" if total else "") + "."
        out.append(f'<div class="chart-box"><h3>System memory</h3><p class="caption">{e(caption)}</p>{chart}'
                   + svg.legend([(ln.css, ln.label) for ln in system if ln.points]) + "</div>")
    return out


def _top(lines: list[svg.Line]) -> float:
    return max((y for ln in lines for _, y in ln.points), default=0.0)


def _scaled(lines: list[svg.Line]) -> tuple[list[svg.Line], str]:
    """Byte series in MiB or GiB (one unit per chart) so the axis ticks are round; and
    that unit's suffix."""
    unit, suffix = _bytes_unit(_top(lines))
    return [svg.Line(ln.label, ln.css, [(x, y / unit) for x, y in ln.points], ln.dashed) for ln in lines], suffix
