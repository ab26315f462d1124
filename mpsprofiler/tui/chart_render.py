"""Text charts: braille lines and stacked block areas on round axis ticks.

Pure functions from series to a Rich :class:`~rich.text.Text` of an exact size, so a
chart costs about a millisecond to draw (a plotext build took tens), its axes say round
numbers in their units, and what it draws is tested without a terminal.

Cells are 2 x 4 braille dots for lines; areas are drawn with eighth blocks, stacked in
the order given (the HTML report's step chart: data wait below, the rest on top).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text

RGB = tuple[int, int, int]
BLOCKS = " ▁▂▃▄▅▆▇█"
BRAILLE_BASE = 0x2800
DOT_BITS = ((0x01, 0x08), (0x02, 0x10), (0x04, 0x20), (0x40, 0x80))
"""Braille dot bit for (row 0-3 from the top, column 0-1) of a cell."""


@dataclass
class Series:
    label: str
    values: Sequence[float | None]
    color: RGB
    area: bool = False
    """An area stacked on the areas before it (else a line)."""


def nice_step(span: float, count: int) -> float:
    """A 1-2-5 step that cuts ``span`` into about ``count`` intervals."""
    if span <= 0 or count < 1:
        return 1.0
    raw = span / count
    power: float = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 2.5, 5, 10):
        if raw <= factor * power * 1.0000001:
            return factor * power
    return 10 * power


def nice_ticks(lo: float, hi: float, count: int = 5, integer: bool = False) -> list[float]:
    """Round tick values covering ``lo``..``hi`` (the last one is >= ``hi``): 0, 50, 100,
    150, not 165.7 / 138.1. An empty or flat range still gives a usable axis."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        lo, hi = 0.0, 1.0
    if hi - lo < 1e-3 * max(1.0, abs(hi)):  # flat (an all-zero series): a unit-wide axis
        hi = lo + (abs(lo) if lo else 1.0)
    step = nice_step(hi - lo, max(1, count))
    if integer:
        step = max(1.0, round(step)) if step >= 1 else 1.0
    first = math.floor(lo / step + 1e-9) * step
    ticks: list[float] = []
    value = first
    while value < hi - 1e-9 * step or not ticks:
        ticks.append(value)
        value = first + len(ticks) * step
    ticks.append(value)
    return [round(t, 10) for t in ticks]


def tick_label(value: float, step: float) -> str:
    """As many decimals as the step needs (0.5 -> 1), no more; big values in k / M."""
    if abs(value) >= 1e6 and step >= 1e5:
        return f"{value / 1e6:g}M"
    if abs(value) >= 1e4 and step >= 1e3:
        return f"{value / 1e3:g}k"
    decimals = max(0, -math.floor(math.log10(step) + 1e-9)) if step > 0 else 0
    if step * 10 ** decimals % 1 > 1e-6:  # 2.5, 0.25: one more decimal
        decimals += 1
    return f"{value:.{decimals}f}"


def bucket_max(xs: Sequence[float], ys: Sequence[float | None], lo: float, hi: float, n: int) -> list[float | None]:
    """The largest value falling in each of ``n`` equal x-buckets of ``lo``..``hi``
    (spikes stay visible); None where no point falls."""
    out: list[float | None] = [None] * n
    scale = n / (hi - lo) if hi > lo else 0.0
    last = n - 1
    for x, y in zip(xs, ys, strict=False):
        if y is None:
            continue
        i = int((x - lo) * scale)
        if i > last:
            i = last
        elif i < 0:
            i = 0
        current = out[i]
        if current is None or y > current:
            out[i] = y
    return out


def render_chart(width: int, height: int, xs: Sequence[float], series: Sequence[Series], *,
                 ylim: tuple[float | None, float | None] = (0.0, None), xlim: tuple[float, float] | None = None,
                 xlabel: str = "", integer_x: bool = False) -> Text:
    """A ``width`` x ``height`` chart of ``series`` over ``xs``: y tick labels and axis on
    the left, x ticks below, then one line with the legend and the x axis's label."""
    legend_row = height >= 6
    rows = height - 2 - (1 if legend_row else 0)
    if rows < 2 or width < 12:
        return Text("")
    # -- y range: areas stack (each point's top, per area), lines stand alone
    stacked_tops = _stack([s.values for s in series if s.area], len(xs))
    line_values = [float(v) for s in series if not s.area for v in s.values if v is not None]
    stack_top = stacked_tops[-1] if stacked_tops else []
    values = line_values + [v for v in stack_top if v] + ([0.0] if stacked_tops else [])
    lo = ylim[0] if ylim[0] is not None else min(values or [0.0])
    hi = ylim[1] if ylim[1] is not None else max(values or [1.0])
    yticks = nice_ticks(lo, hi, max(1, min(5, rows // 2)))
    if ylim[1] is not None and len(yticks) > 1 and yticks[-1] > ylim[1] + 1e-9:
        yticks = [t for t in yticks if t <= ylim[1] + 1e-9] or yticks
    ystep = yticks[1] - yticks[0] if len(yticks) > 1 else 1.0
    y0, y1 = yticks[0], max(yticks[-1], hi if ylim[1] is not None else yticks[-1])
    labels = [tick_label(t, ystep) for t in yticks]
    label_w = max(len(label) for label in labels)
    cols = width - label_w - 1
    if cols < 4:
        return Text("")
    # -- x range
    if xlim is not None:
        x0, x1 = xlim
    elif xs:
        x0, x1 = min(xs), max(xs)
    else:
        x0, x1 = 0.0, 1.0
    if x1 <= x0:
        x1 = x0 + 1.0
    # -- the plot: per cell a glyph and colours
    glyph = [[" "] * cols for _ in range(rows)]
    fg: list[list[RGB | None]] = [[None] * cols for _ in range(rows)]
    bg: list[list[RGB | None]] = [[None] * cols for _ in range(rows)]
    yspan = (y1 - y0) or 1.0
    base = [0.0] * cols  # stacked height so far, in eighths of a cell
    for s, tops in zip([s for s in series if s.area], stacked_tops, strict=True):
        stacked = _hold(bucket_max(xs, tops, x0, x1, cols))
        for c in range(cols):
            value = stacked[c]
            if value is None:
                continue
            top = max(0.0, min(1.0, (value - y0) / yspan)) * rows * 8
            bottom = base[c]
            if top <= bottom:
                continue
            _fill(glyph, fg, bg, c, rows, bottom, top, s.color)
            base[c] = top
    dots = [[0] * cols for _ in range(rows)]
    for s in series:
        if s.area:
            continue
        _draw_line(dots, fg, glyph, xs, s.values, x0, x1, y0, yspan, rows, cols, s.color)
    # -- assemble
    text = Text(no_wrap=True, overflow="crop")
    tick_rows = {round((1 - (t - y0) / yspan) * (rows - 1)): label for t, label in zip(yticks, labels, strict=True)}
    axis_style = Style(dim=True)
    styles: dict[tuple[RGB | None, RGB | None], Style | None] = {(None, None): None}
    for r in range(rows):
        label = tick_rows.get(r, "")
        text.append(label.rjust(label_w) + ("┤" if r in tick_rows else "│"), axis_style)
        run: list[str] = []
        run_key: tuple[RGB | None, RGB | None] = (None, None)
        for c in range(cols):
            key = (fg[r][c], bg[r][c])
            if key != run_key and run:
                text.append("".join(run), _style(styles, run_key))
                run = []
            run_key = key
            run.append(chr(BRAILLE_BASE + dots[r][c]) if dots[r][c] else glyph[r][c])
        text.append("".join(run), _style(styles, run_key))
        text.append("\n")
    # x axis and its ticks
    xstep_count = max(2, min(8, cols // 8))
    xticks = [t for t in nice_ticks(x0, x1, xstep_count, integer=integer_x) if x0 - 1e-9 <= t <= x1 + 1e-9]
    xstep = nice_step(x1 - x0, xstep_count)
    if integer_x:
        xstep = max(1.0, round(xstep))
    axis = ["─"] * cols
    tick_line = [" "] * (cols + label_w + 1)
    taken_until = -1
    for t in xticks:
        c = min(cols - 1, max(0, round((t - x0) / (x1 - x0) * (cols - 1))))
        label = tick_label(t, xstep)
        start = label_w + 1 + c - len(label) // 2
        start = max(0, min(start, len(tick_line) - len(label)))
        if start <= taken_until + 1:
            continue
        axis[c] = "┬"
        tick_line[start:start + len(label)] = list(label)
        taken_until = start + len(label)
    text.append(" " * label_w + "└" + "".join(axis) + "\n", axis_style)
    text.append("".join(tick_line).rstrip().ljust(width), axis_style)
    if legend_row:
        text.append("\n")
        legend = Text(no_wrap=True, overflow="crop")
        for s in series:
            legend.append("■ " if s.area else "━ ", Style(color=_rgb(s.color)))
            legend.append(s.label + "  ")
        gap = width - legend.cell_len - len(xlabel) - 3
        if xlabel and gap >= 1:  # the x unit when it fits whole, never cut
            legend.append(" " * gap + f"x: {xlabel}", axis_style)
        legend.truncate(width, pad=True)
        text.append_text(legend)
    return text


def _stack(areas: list[Sequence[float | None]], n: int) -> list[list[float | None]]:
    """Per area, the top of the stack at each of ``n`` points (negative values add
    nothing; None where the area has no point there, which the areas above still see)."""
    running = [0.0] * n
    out: list[list[float | None]] = []
    for values in areas:
        values = list(values[:n]) + [None] * (n - len(values))
        running = [r if v is None or v <= 0 else r + v for r, v in zip(running, values, strict=True)]
        out.append([None if v is None else r for r, v in zip(running, values, strict=True)])
    return out


def _hold(values: list[float | None]) -> list[float | None]:
    """An area has no holes between its points: an empty column (more columns than
    points) holds the value on its left."""
    last = max((i for i, v in enumerate(values) if v is not None), default=-1)
    held: float | None = None
    out = list(values)
    for i in range(last + 1):
        if out[i] is None:
            out[i] = held
        else:
            held = out[i]
    return out


def _fill(glyph: list[list[str]], fg: list[list[RGB | None]], bg: list[list[RGB | None]], c: int, rows: int,
          bottom: float, top: float, color: RGB) -> None:
    """Fill column ``c`` from ``bottom`` to ``top`` (eighths of a cell, from the floor);
    a cell whose lower part holds the area below gets this colour as its background."""
    first, last = int(bottom // 8), min(rows - 1, int(math.ceil(top / 8)) - 1)
    for cell in range(first, last + 1):
        r = rows - 1 - cell
        lo = cell * 8
        if lo < bottom < lo + 8 and glyph[r][c] != " ":
            bg[r][c] = color
            continue
        eighths = int(round(min(lo + 8, top) - lo))
        if eighths > 0:
            glyph[r][c] = BLOCKS[min(8, eighths)]
            fg[r][c] = color


def _draw_line(dots: list[list[int]], fg: list[list[RGB | None]], glyph: list[list[str]], xs: Sequence[float],
               values: Sequence[float | None], x0: float, x1: float, y0: float, yspan: float, rows: int, cols: int,
               color: RGB) -> None:
    """Braille dots through the points (the largest per dot column), joined to the next
    point, so a sparse series reads as a line and a jump as a vertical stroke."""
    width_dots, height_dots = cols * 2, rows * 4
    points = [(dx, height_dots - 1 - round(max(0.0, min(1.0, (v - y0) / yspan)) * (height_dots - 1)))
              for dx, v in enumerate(bucket_max(xs, values, x0, x1, width_dots)) if v is not None]

    def dot(x: int, y: int) -> None:
        r, c = y // 4, x // 2
        dots[r][c] |= DOT_BITS[y % 4][x % 2]
        fg[r][c] = color

    for n, (dx, dy) in enumerate(points):
        if n == 0:
            dot(dx, dy)
            continue
        px, py = points[n - 1]
        for x in range(px + 1, dx + 1):  # the segment, column by column
            y_from = py + (dy - py) * (x - 1 - px) / (dx - px)
            y_to = py + (dy - py) * (x - px) / (dx - px)
            for y in range(round(min(y_from, y_to)), round(max(y_from, y_to)) + 1):
                dot(x, y)


def _style(cache: dict[tuple[RGB | None, RGB | None], Style | None], key: tuple[RGB | None, RGB | None]) -> Style | None:
    if key not in cache:
        cache[key] = Style(color=_rgb(key[0]), bgcolor=_rgb(key[1]))
    return cache[key]


def _rgb(color: RGB | None) -> str | None:
    return None if color is None else f"rgb({color[0]},{color[1]},{color[2]})"
