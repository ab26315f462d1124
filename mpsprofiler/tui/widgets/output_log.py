"""The script's stdout and stderr, shown as a terminal would (``\\r`` rewrites the line).

A line-API widget over a :class:`~..terminal.TerminalBuffer`: only the visible lines are
rendered, memory is bounded by the buffer, and a progress bar redrawn a thousand times a
second costs one line's render per refresh. It follows the end of the output unless the
user scrolled up (like ``tail -f`` in a pager).

Cost: text goes into the buffer as it arrives (four times a second), but the view catches
up only while it is shown, with the app's once-a-second redraw of the panel (or, without
one, at most every :data:`SYNC_EVERY`). A grown line count moves
the scrollbar, not the widget: it is applied without laying the whole screen out again
(a full layout cost the parent ~17 ms, four times a second), except when a scrollbar
appears or goes.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.text import Text
from textual.cache import LRUCache
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ..terminal import TerminalBuffer

SYNC_EVERY = 1.0
"""Seconds between catch-ups of a shown log with new output (the eye needs no more)."""


class OutputLog(ScrollView, can_focus=True):
    DEFAULT_CSS = """
    OutputLog {
        background: $surface;
        color: $text;
        overflow: auto;
    }
    """

    def __init__(self, *, max_lines: int = 5000, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.buffer = TerminalBuffer(max_lines)
        self._width = 0
        self._cache: LRUCache[tuple[int, str], Strip] = LRUCache(1024)
        self._seen_changes = -1
        self._behind = False
        self._last_sync = 0.0
        self._pending = False
        self.on_sync: Callable[[], None] | None = None
        """Called after the view caught up with new output (the panel's line count)."""

    def write(self, text: str) -> None:
        """Append output (any mix of partial lines, ``\\r`` and ``\\n``)."""
        self.buffer.write(text)
        self._behind = True
        if not self._shown():  # hidden (another panel is up): keep the text, lay it out when shown
            return
        if not self._pending:
            # the app's 1 s redraw normally catches up first (one screen update for the
            # panel, the header and this: a catch-up that scrolls re-renders the screen,
            # ~40 ms, so never more than once a second); the timer is for a run that has
            # ended, or a recorded one
            self._pending = True
            wait = max(0.0, self._last_sync + SYNC_EVERY - time.monotonic())
            self.set_timer(wait + SYNC_EVERY / 2, self._sync_pending)

    def _sync_pending(self) -> None:
        self._pending = False
        if self._shown():
            self.catch_up()

    def catch_up(self) -> None:
        """Show what arrived since the last catch-up (called when the Log panel is drawn)."""
        if self._behind:
            self._behind = False
            self._sync(self._following())

    def _following(self) -> bool:
        return self.is_vertical_scroll_end or self.max_scroll_y == 0

    def _shown(self) -> bool:
        return self.is_mounted and all(getattr(node, "display", True) for node in self.ancestors_with_self)

    def _sync(self, follow: bool) -> None:
        if self.buffer.changes == self._seen_changes:
            return
        self._seen_changes = self.buffer.changes
        self._last_sync = time.monotonic()
        widest = self._width
        count = len(self.buffer)
        # only new or rewritten lines can widen the view: check the last few
        for i in range(max(0, count - 64), count):
            widest = max(widest, Text.from_ansi(self.buffer.line(i)).cell_len)
        self._width = widest
        self._set_virtual_size(Size(widest, count))
        if follow:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        self.refresh()
        if self.on_sync is not None:
            self.on_sync()

    def _set_virtual_size(self, size: Size) -> None:
        """A new scroll extent without laying the screen out again: the widget's own region
        never depends on how much output there is. Textual's scrollbar update still lays
        out when a scrollbar appears or goes (those are layout reactives)."""
        if size == self.virtual_size:
            return
        update = getattr(self, "_scroll_update", None)  # Textual's own scrollbar refresh
        if update is None or not self.is_mounted or not self.container_size:
            self.virtual_size = size  # a reactive that lays the whole screen out again
            return
        self.set_reactive(ScrollView.virtual_size, size)
        update(size)

    @property
    def line_count(self) -> int:
        return len(self.buffer)

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.size.width
        style = self.rich_style
        if index >= len(self.buffer):
            return Strip.blank(width, style)
        raw = self.buffer.line(index)
        key = (self.buffer.first_number + index, raw)
        strip = self._cache.get(key)
        if strip is None:
            text = Text.from_ansi(raw, no_wrap=True, end="")
            text.stylize(style)
            segments = list(text.render(self.app.console))
            strip = Strip(segments, text.cell_len)
            self._cache[key] = strip
        return strip.crop_extend(scroll_x, scroll_x + width, style).apply_offsets(scroll_x, index)

