"""Line charts (plotext through textual-plotext) that redraw only when given new data.

A chart keeps its data, not a rendered plot: at render time the series are bucketed to
about two points per cell of the current width (braille markers give two dots per cell),
so a long run costs the same to draw as a short one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from collections.abc import Sequence

from rich.text import Text
from textual.app import RenderResult
from textual.timer import Timer
from textual_plotext import PlotextPlot

# colours that read well on dark and light themes (plotext takes RGB tuples)
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


def bucket(xs: Sequence[float], ys: Sequence[float | None], n: int) -> tuple[list[float], list[float]]:
    """At most ``n`` points: each bucket keeps its largest value (spikes stay visible)."""
    pairs = [(x, y) for x, y in zip(xs, ys, strict=False) if y is not None]
    if len(pairs) <= n or n <= 0:
        return [p[0] for p in pairs], [float(p[1]) for p in pairs]
    out_x: list[float] = []
    out_y: list[float] = []
    size = len(pairs) / n
    for b in range(n):
        chunk = pairs[int(b * size) : int((b + 1) * size)] or [pairs[min(int(b * size), len(pairs) - 1)]]
        top = max(chunk, key=lambda p: p[1])
        out_x.append(chunk[-1][0])
        out_y.append(float(top[1]))
    return out_x, out_y


def integer_ticks(lo: float, hi: float, count: int = 6) -> list[int]:
    """Whole-number ticks (step indices) spread over ``lo``..``hi``."""
    lo_i, hi_i = int(lo), int(hi)
    if hi_i <= lo_i:
        return [lo_i]
    n = min(count, hi_i - lo_i + 1)
    return sorted({round(lo_i + (hi_i - lo_i) * k / (n - 1)) for k in range(n)})


class LineChart(PlotextPlot):
    min_interval = 1.0
    """Seconds between redraws: plotext takes tens of ms per chart, data comes faster."""

    DEFAULT_CSS = """
    LineChart {
        height: 1fr;
        min-height: 7;
        border: round $primary 40%;
        border-title-color: $text-accent;
    }
    """

    def __init__(
        self,
        title: str,
        *,
        xlabel: str = "",
        integer_x: bool = False,
        empty: str = "no data yet",
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self._title = title
        self.xlabel = xlabel
        self.integer_x = integer_x
        self.empty = empty
        self._x: list[float] = []
        self._lines: list[Line] = []
        self._ylim: YLimits | None = None
        self._key: object = None
        self.border_title = title
        self._last_draw = 0.0
        self._pending: Timer | None = None
        self._generation = 0
        self._rendered: tuple[tuple, RenderResult] | None = None

    @property
    def chart_title(self) -> str:
        return self._title

    @chart_title.setter
    def chart_title(self, value: str) -> None:
        self._title = value
        self.border_title = value

    def set_data(
        self,
        x: Sequence[float],
        lines: list[Line],
        *,
        ylim: YLimits | None = None,
        key: object = None,
    ) -> None:
        """New data; ``key`` (e.g. the session version) skips redraws when unchanged.

        ``ylim`` is (lower, upper) of the y axis, a None end is automatic.
        """
        if key is not None and key == self._key:
            return
        self._key = key
        self._ylim = ylim
        self._x = list(x)
        self._lines = [line for line in lines if any(v is not None for v in line.values)]
        wait = self._last_draw + self.min_interval - time.monotonic()
        if wait <= 0:
            self._draw()
        elif self._pending is None:
            self._pending = self.set_timer(wait, self._draw)

    def _draw(self) -> None:
        self._pending = None
        self._last_draw = time.monotonic()
        self._generation += 1
        self.refresh()

    @property
    def has_data(self) -> bool:
        return bool(self._x) and bool(self._lines)

    def render(self) -> RenderResult:
        """The plot, rebuilt only for new data, a new size or a new theme (layout passes
        re-render every widget, and a plotext build costs tens of milliseconds)."""
        signature = (self._generation, self.size, self.app.theme, self.theme)
        if self._rendered is not None and self._rendered[0] == signature:
            return self._rendered[1]
        result = self._build()
        self._rendered = (signature, result)
        return result

    def _build(self) -> RenderResult:
        if not self.has_data or self.size.width < 10 or self.size.height < 4:
            return Text(f"\n{self.empty}", style="dim", justify="center")
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        n = max(8, (self.size.width - 12) * 2)
        for line in self._lines:
            xs, ys = bucket(self._x, line.values, n)
            if not xs:
                continue
            # an area is drawn with quarter blocks: solid, and several times cheaper to
            # fill than braille; a line keeps braille's finer resolution
            plt.plot(xs, ys, label=line.label, color=line.color, marker="hd" if line.fill else "braille", fillx=line.fill)
        if self._ylim is not None:
            lower, upper = self._ylim
            values = [v for line in self._lines for v in line.values if v is not None]
            top = upper if upper is not None else max(values or [1.0]) * 1.05
            bottom = lower if lower is not None else min(values or [0.0])
            plt.ylim(bottom, max(top, bottom + 1e-9))
        if self.integer_x and self._x:
            ticks = integer_ticks(min(self._x), max(self._x))
            plt.xticks(ticks, [str(t) for t in ticks])
        if self.xlabel:
            plt.xlabel(self.xlabel)
        return super().render()
