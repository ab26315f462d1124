"""The script's stdout and stderr, shown as a terminal would (``\\r`` rewrites the line).

A line-API widget over a :class:`~..terminal.TerminalBuffer`: only the visible lines are
rendered, memory is bounded by the buffer, and a progress bar redrawn a thousand times a
second costs one line's render per refresh. It follows the end of the output unless the
user scrolled up (like ``tail -f`` in a pager).
"""

from __future__ import annotations

from rich.text import Text
from textual.cache import LRUCache
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ..terminal import TerminalBuffer


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

    def write(self, text: str) -> None:
        """Append output (any mix of partial lines, ``\\r`` and ``\\n``)."""
        self.buffer.write(text)
        if self._shown():
            self._sync(self._following())
        else:  # hidden (another panel is up): keep the text, lay it out when shown
            self._behind = True

    def catch_up(self) -> None:
        """Called when the Log panel is drawn: show what arrived while it was hidden."""
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
        widest = self._width
        count = len(self.buffer)
        # only new or rewritten lines can widen the view: check the last few
        for i in range(max(0, count - 64), count):
            widest = max(widest, Text.from_ansi(self.buffer.line(i)).cell_len)
        self._width = widest
        self.virtual_size = Size(widest, count)
        if follow:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        self.refresh()

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

