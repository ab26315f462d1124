"""Inline SVG charts for the HTML report: no script, no fonts, no network.

Colours come from CSS classes (``s1`` ... ``s5``, ``axis``, ``band``) so the page's
light/dark palette and print styles apply. Hover titles (``<title>``) give exact
values without JavaScript. Every label is escaped: series names may quote the script.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

WIDTH = 960
HEIGHT = 240
LEFT, RIGHT, TOP, BOTTOM = 72, 16, 14, 30
MAX_BARS = 300
"""Up to this many steps each gets a bar (with a hover title); more become an area."""


def e(value: Any) -> str:
    """Any value as HTML text, quotes escaped too (safe in an attribute)."""
    return escape(str(value), quote=True)


@dataclass
class Line:
    label: str
    css: str
    points: list[tuple[float, float]]
    dashed: bool = False


@dataclass
class Bar:
    x: float
    total: float
    part: float
    title: str
    muted: bool = False


@dataclass
class Axis:
    lo: float
    hi: float
    fmt: Callable[[float], str]
    ticks: list[float] = field(default_factory=list)


def nice_step(span: float, count: int = 4) -> float:
    if span <= 0 or not math.isfinite(span):
        return 1.0
    raw = span / count
    mag: float = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if m * mag >= raw:
            return m * mag
    return 10 * mag


def axis(lo: float, hi: float, fmt: Callable[[float], str], count: int = 4, from_zero: bool = True) -> Axis:
    """An axis with round ticks that covers ``lo..hi``."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi - lo > 1e300:
        lo, hi = 0.0, 1.0  # damaged figures: an empty axis rather than a crash
    if from_zero:
        lo = min(0.0, lo)
    if hi <= lo:
        hi = lo + 1.0
    step = nice_step(hi - lo, count)
    start = math.floor(lo / step) * step
    end = math.ceil(hi / step - 1e-9) * step
    ticks = []
    n = 0
    while start + n * step <= end + step * 1e-6 and n < 50:
        ticks.append(start + n * step)
        n += 1
    return Axis(start, end, fmt, ticks)


class Frame:
    """Maps data to pixels inside the plot area of one chart."""

    def __init__(self, x: Axis, y: Axis, width: int = WIDTH, height: int = HEIGHT) -> None:
        self.x, self.y, self.width, self.height = x, y, width, height
        self.pw = width - LEFT - RIGHT
        self.ph = height - TOP - BOTTOM

    def px(self, v: float) -> float:
        span = (self.x.hi - self.x.lo) or 1.0
        return round(LEFT + (v - self.x.lo) / span * self.pw, 1)

    def py(self, v: float) -> float:
        span = (self.y.hi - self.y.lo) or 1.0
        v = min(max(v, self.y.lo), self.y.hi)
        return round(TOP + self.ph - (v - self.y.lo) / span * self.ph, 1)

    def grid(self, x_label: str) -> list[str]:
        out = []
        for t in self.y.ticks:
            y = self.py(t)
            out.append(f'<line class="grid" x1="{LEFT}" x2="{self.width - RIGHT}" y1="{y}" y2="{y}"/>')
            out.append(f'<text class="tick" x="{LEFT - 6}" y="{y + 4}" text-anchor="end">{escape(self.y.fmt(t))}</text>')
        label_left = self.width - RIGHT - 7 * len(x_label) - 12  # ticks under the axis label are left out
        for t in self.x.ticks:
            x = self.px(t)
            if x > label_left:
                continue
            out.append(f'<line class="grid faint" x1="{x}" x2="{x}" y1="{TOP}" y2="{TOP + self.ph}"/>')
            out.append(f'<text class="tick" x="{x}" y="{self.height - 10}" text-anchor="middle">'
                       f"{escape(self.x.fmt(t))}</text>")
        base = TOP + self.ph
        out.append(f'<line class="axis" x1="{LEFT}" x2="{self.width - RIGHT}" y1="{base}" y2="{base}"/>')
        out.append(f'<text class="tick axis-label" x="{self.width - RIGHT}" y="{self.height - 10}" '
                   f'text-anchor="end">{escape(x_label)}</text>')
        return out


def _svg(title: str, body: list[str], width: int = WIDTH, height: int = HEIGHT) -> str:
    return (f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" '
            f'preserveAspectRatio="xMidYMid meet"><title>{escape(title)}</title>' + "".join(body) + "</svg>")


def bar_chart(title: str, bars: Sequence[Bar], y: Axis, x_label: str, x_fmt: Callable[[float], str],
              band: tuple[float, float, str] | None = None) -> str:
    """Bars of ``total`` with their ``part`` drawn at the bottom (step time and data wait).

    Bars above the axis are clipped at the top and get a marker; their title tells the
    real value. Many bars become two filled areas.
    """
    if not bars:
        return ""
    xs = [b.x for b in bars]
    lo, hi = min(xs), max(xs)
    x = axis(lo - 0.5, hi + 0.5, x_fmt, count=6, from_zero=False)
    x.lo, x.hi = lo - 0.5, hi + 0.5
    x.ticks = [t for t in x.ticks if x.lo <= t <= x.hi and float(t).is_integer()]
    frame = Frame(x, y)
    body = []
    if band is not None and band[1] > band[0]:
        x0, x1 = frame.px(band[0] - 0.5), frame.px(band[1] - 0.5)
        body.append(f'<rect class="band" x="{x0}" y="{TOP}" width="{max(0.0, x1 - x0)}" height="{frame.ph}"/>')
        body.append(f'<text class="band-label" x="{x0 + 2}" y="{TOP - 3}">{escape(band[2])}</text>')
    body += frame.grid(x_label)
    base = TOP + frame.ph
    if len(bars) <= MAX_BARS:
        width = max(0.6, frame.pw / (hi - lo + 1) * 0.8)
        for b in bars:
            left = round(frame.px(b.x) - width / 2, 1)
            top_total, top_part = frame.py(b.total), frame.py(b.part)
            cls = "s2 muted" if b.muted else "s2"
            parts = [f"<title>{escape(b.title)}</title>",
                     f'<rect class="{cls}" x="{left}" y="{top_total}" width="{width:.1f}" height="{base - top_total:.1f}"/>']
            if b.part > 0:
                parts.append(f'<rect class="{"s1 muted" if b.muted else "s1"}" x="{left}" y="{top_part}" width="{width:.1f}" '
                             f'height="{base - top_part:.1f}"/>')
            if b.total > y.hi:
                cx = left + width / 2
                parts.append(f'<path class="clip" d="M{cx - 5:.1f},{TOP + 7} L{cx:.1f},{TOP} L{cx + 5:.1f},{TOP + 7} Z"/>')
            body.append("<g>" + "".join(parts) + "</g>")
    else:
        body.append(_area(frame, [(b.x, b.total) for b in bars], "s2"))
        body.append(_area(frame, [(b.x, b.part) for b in bars], "s1"))
        for b in bars:
            if b.total > y.hi:
                cx = frame.px(b.x)
                body.append(f'<path class="clip" d="M{cx - 5:.1f},{TOP + 7} L{cx:.1f},{TOP} L{cx + 5:.1f},{TOP + 7} Z">'
                            f"<title>{escape(b.title)}</title></path>")
    return _svg(title, body)


def _area(frame: Frame, points: list[tuple[float, float]], css: str) -> str:
    base = TOP + frame.ph
    coords = " ".join(f"L{frame.px(px)},{frame.py(py)}" for px, py in points)
    first, last = frame.px(points[0][0]), frame.px(points[-1][0])
    return f'<path class="{css} area" d="M{first},{base} {coords} L{last},{base} Z"/>'


def line_chart(title: str, lines: Sequence[Line], y_fmt: Callable[[float], str], x_label: str,
               x_fmt: Callable[[float], str], height: int = HEIGHT) -> str:
    """Lines over a shared time axis (memory); an empty chart says so instead."""
    lines = [ln for ln in lines if ln.points]
    if not lines:
        return ""
    xs = [p[0] for ln in lines for p in ln.points]
    ys = [p[1] for ln in lines for p in ln.points]
    x = axis(min(xs), max(xs), x_fmt, count=6, from_zero=False)
    x.lo, x.hi = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    x.ticks = [t for t in x.ticks if x.lo <= t <= x.hi]
    y = axis(0.0, max(ys) * 1.05 if max(ys) > 0 else 1.0, y_fmt, count=4)
    frame = Frame(x, y, height=height)
    body = frame.grid(x_label)
    for ln in lines:
        dash = ' stroke-dasharray="6 4"' if ln.dashed else ""
        if len(ln.points) == 1:
            px, py = ln.points[0]
            body.append(f'<circle class="{ln.css} dot" cx="{frame.px(px)}" cy="{frame.py(py)}" r="3">'
                        f"<title>{escape(ln.label)}</title></circle>")
            continue
        coords = " ".join(f"{frame.px(px)},{frame.py(py)}" for px, py in ln.points)
        body.append(f'<polyline class="{ln.css} line" points="{coords}"{dash}><title>{escape(ln.label)}</title></polyline>')
    return _svg(title, body, height=height)


def legend(items: Sequence[tuple[str, str]]) -> str:
    """An HTML legend (``css`` class, label) under a chart."""
    spans = "".join(f'<span class="key"><i class="swatch {escape(css)}"></i>{escape(label)}</span>' for css, label in items)
    return f'<div class="legend">{spans}</div>'
