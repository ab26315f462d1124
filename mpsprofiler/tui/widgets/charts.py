"""Charts that redraw only when given new data, at most once a second.

A chart keeps its data, not a rendered plot; :func:`~..chart_render.render_chart` draws
it for the current size (braille lines, stacked block areas, round ticks) in about a
millisecond, and the result is kept until the data, the size or the theme changes.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.segment import Segment
from rich.style import Style as RichStyle
from rich.text import Text
from textual.app import RenderResult
from textual.strip import Strip
from textual.timer import Timer
from textual.visual import Visual
from textual.widget import Widget

if TYPE_CHECKING:
    from textual.css.styles import RulesMap
    from textual.style import Style
    from textual.visual import RenderOptions

from ..chart_render import Series, render_chart
from ..chart_series import Line, YLimits
from ..safe import finite

JITTER = 0.2
"""Share of ``min_interval`` a redraw may come early (with the tick that brought the data)."""


def _plottable(x: Sequence[float], lines: list[Line]) -> tuple[list[float], list[Line]]:
    """Only points a chart can place: a recording may hold NaN, inf or a string where a
    number belongs (the tables show those raw); such an x drops its point, such a y is a gap."""
    if _all_finite(x):  # the common case, checked at C speed: no call per point
        xs = [float(v) for v in x]
        out = []
        for line in lines:
            values = list(line.values)[:len(xs)]
            values += [None] * (len(xs) - len(values))
            known = [v for v in values if v is not None]
            if not known:
                continue
            ys = values if _all_finite(known) else [finite(v) for v in values]
            if any(v is not None for v in ys):
                out.append(Line(line.label, ys, line.color, line.fill))
        return xs, out
    keep = [i for i, v in enumerate(x) if finite(v) is not None]
    xs = [float(x[i]) for i in keep]
    out = []
    for line in lines:
        values = list(line.values)
        ys = [finite(values[i]) if i < len(values) else None for i in keep]
        if any(v is not None for v in ys):
            out.append(Line(line.label, ys, line.color, line.fill))
    return xs, out


_NUMBERS = frozenset({float, int})


def _all_finite(values: Sequence[object]) -> bool:
    """Only ints and floats (no bools), none NaN or infinite."""
    if not set(map(type, values)) <= _NUMBERS:
        return False
    try:
        return math.isfinite(math.fsum(values))  # type: ignore[arg-type]
    except OverflowError:
        return False


class ChartStrips(Visual):
    """A drawn chart, handed to Textual as strips.

    Textual's path for a Rich ``Text`` (convert it to ``Content``, then wrap, align and
    style every line) cost twice what drawing the chart did, for text that is laid out
    cell by cell already: one line per row, nothing to wrap, styles on runs that do not
    overlap. Each run becomes one segment over the widget's own style, as Textual
    composes them.
    """

    def __init__(self, text: Text) -> None:
        self.text = text
        self._lines = list(Segment.split_lines(_segments(text)))
        self._strips: tuple[tuple[int, RichStyle], list[Strip]] | None = None

    def render_strips(self, width: int, height: int | None, style: Style, options: RenderOptions) -> list[Strip]:
        base = style.rich_style
        key = (width, base)
        if self._strips is None or self._strips[0] != key:
            lines = self._lines if height is None else self._lines[:height]
            strips = [Strip(Segment.apply_style(line, base)).crop_extend(0, width, base) for line in lines]
            self._strips = (key, strips)
        return self._strips[1]

    def get_optimal_width(self, rules: RulesMap, container_width: int) -> int:
        return max((Segment.get_line_length(line) for line in self._lines), default=0)

    def get_height(self, rules: RulesMap, width: int) -> int:
        return len(self._lines)


def _segments(text: Text) -> list[Segment]:
    """The text's runs as segments (spans in order, gaps in the text's own style)."""
    plain = text.plain
    base = text.style if isinstance(text.style, RichStyle) else (RichStyle.parse(text.style) if text.style else None)
    out: list[Segment] = []
    pos = 0
    for span in sorted(text.spans, key=lambda sp: sp.start):
        if span.start > pos:
            out.append(Segment(plain[pos:span.start], base))
        start = max(pos, span.start)
        if span.end > start:
            style = span.style if isinstance(span.style, RichStyle) else RichStyle.parse(span.style)
            out.append(Segment(plain[start:span.end], base + style if base else style))
            pos = span.end
    if pos < len(plain):
        out.append(Segment(plain[pos:], base))
    return out


class LineChart(Widget):
    min_interval = 1.0
    """Seconds between redraws: data comes four times a second, the eye needs less."""

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
        # a chart holds no links: Textual's link styling would copy each of its strips
        # at every redraw (a tenth of what redrawing the Overview cost)
        self.set_reactive(Widget.auto_links, False)
        self._title = title
        self.xlabel = xlabel
        self.integer_x = integer_x
        self.empty = empty
        self._x: list[float] = []
        self._lines: list[Line] = []
        self._ylim: YLimits | None = None
        self._xlim: tuple[float, float] | None = None
        self._key: object = None
        self.border_title = title
        self._last_draw = 0.0
        self._pending: Timer | None = None
        self._generation = 0
        self._rendered: tuple[tuple[object, ...], RenderResult] | None = None

    @property
    def key(self) -> object:
        """The ``key`` of the data shown (see :meth:`set_data`)."""
        return self._key

    @property
    def chart_title(self) -> str:
        return self._title

    @chart_title.setter
    def chart_title(self, value: str) -> None:
        if value != self._title:
            self._title = value
            self.border_title = value

    def set_data(
        self,
        x: Sequence[float],
        lines: list[Line],
        *,
        ylim: YLimits | None = None,
        xlim: tuple[float, float] | None = None,
        key: object = None,
    ) -> None:
        """New data; ``key`` (e.g. the session version) skips redraws when unchanged.

        ``ylim`` is (lower, upper) of the y axis, a None end is automatic; ``xlim`` makes
        charts of one time line share their x range.
        """
        if key is not None and key == self._key:
            return
        self._key = key
        self._ylim = ylim
        self._xlim = xlim
        self._x, self._lines = _plottable(x, lines)
        wait = self._last_draw + self.min_interval - time.monotonic()
        # data comes with the app's 1 s tick, which jitters: a strict "wait <= 0" put most
        # redraws on a timer of their own, a screen update of its own a few ms later
        if wait <= JITTER * self.min_interval:
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
        """The chart, rebuilt only for new data, a new size or a new theme (layout passes
        re-render every widget)."""
        signature = (self._generation, self.size, self.app.theme)
        if self._rendered is not None and self._rendered[0] == signature:
            return self._rendered[1]
        try:
            result = self._build()
        except Exception as exc:  # noqa: BLE001 - a value the chart cannot place must not end the app
            result = Text(f"\ncannot draw this chart ({type(exc).__name__}: {exc})", style="dim", justify="center")
        self._rendered = (signature, result)
        return result

    def _build(self) -> RenderResult:
        width, height = self.content_region.width or self.size.width, self.content_region.height or self.size.height
        if not self.has_data or width < 12 or height < 4:
            return Text(f"\n{self.empty}", style="dim", justify="center")
        series = [Series(line.label, line.values, line.color, area=line.fill) for line in self._lines]
        ylim = self._ylim if self._ylim is not None else (None, None)
        return ChartStrips(render_chart(width, height, self._x, series, ylim=ylim, xlim=self._xlim,
                                        xlabel=self.xlabel, integer_x=self.integer_x))
