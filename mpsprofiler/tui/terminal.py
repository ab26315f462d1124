"""The script's output as a terminal would show it, in bounded memory.

Progress bars (tqdm and friends) redraw their line with ``\\r``; a log that appended
every redraw would fill with thousands of half-drawn bars. :class:`TerminalBuffer`
applies ``\\r`` (back to the start of the line, later characters overwrite), ``\\b`` and
tabs the way a terminal does, keeps colour (SGR) escapes as zero-width tokens and drops
every other escape sequence (cursor moves, screen clears), which a log cannot replay.
"""

from __future__ import annotations

import re
from collections import deque

MAX_LINES = 5000
MAX_LINE_CELLS = 4000
_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_SGR = re.compile(r"\x1b\[[0-9;]*m\Z")
_TOKENS = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])|[\r\n\b\t]|[^\x1b\r\n\b\t]+|\x1b")


class TerminalBuffer:
    """Completed lines (the last ``max_lines``) plus the line being written."""

    def __init__(self, max_lines: int = MAX_LINES) -> None:
        self.lines: deque[str] = deque(maxlen=max_lines)
        self.committed = 0
        """Lines completed since the start (also those that fell off the front)."""
        self._cells: list[str] = []  # printable chars, and SGR escapes (zero width)
        self._cursor = 0  # index into _cells
        self.changes = 0
        """Bumped on every write: the view redraws only when it moved."""

    # -- writing --------------------------------------------------------------------
    def write(self, text: str) -> None:
        if not text:
            return
        self.changes += 1
        for token in _TOKENS.findall(text):
            if token == "\n":
                self._commit()
            elif token == "\r":
                self._cursor = 0
            elif token == "\b":
                self._back()
            elif token == "\t":
                self._put_text(" " * (8 - self._column() % 8))
            elif token.startswith("\x1b"):
                if _SGR.match(token):
                    self._cells.insert(self._cursor, token)
                    self._cursor += 1
            else:
                self._put_text(token)

    def _put_text(self, text: str) -> None:
        cells, cursor = self._cells, self._cursor
        if cursor == len(cells):  # the common case: appending
            room = MAX_LINE_CELLS - len(cells)
            if room > 0:
                cells.extend(text[:room])
            self._cursor = len(cells)
            return
        if cursor == 0 and len(text) >= len(cells) and not any(c.startswith("\x1b") for c in cells):
            # a progress bar redrawn after "\r": the new text covers the whole old line
            self._cells = list(text[:MAX_LINE_CELLS])
            self._cursor = len(self._cells)
            return
        for ch in text:
            while cursor < len(cells) and cells[cursor].startswith("\x1b"):
                cursor += 1
            if cursor < len(cells):
                cells[cursor] = ch
            elif len(cells) < MAX_LINE_CELLS:
                cells.append(ch)
            else:
                break
            cursor += 1
        self._cursor = cursor

    def _back(self) -> None:
        cursor = self._cursor - 1
        while cursor >= 0 and self._cells[cursor].startswith("\x1b"):
            cursor -= 1
        self._cursor = max(cursor, 0)

    def _column(self) -> int:
        return sum(1 for c in self._cells[: self._cursor] if not c.startswith("\x1b"))

    def _commit(self) -> None:
        self.lines.append("".join(self._cells))
        self.committed += 1
        self._cells = []
        self._cursor = 0

    # -- reading --------------------------------------------------------------------
    @property
    def current(self) -> str:
        """The line being written (without its newline yet)."""
        return "".join(self._cells)

    def __len__(self) -> int:
        """Lines to show: the completed ones plus a non-empty current line."""
        return len(self.lines) + (1 if self._cells else 0)

    def line(self, index: int) -> str:
        if index < len(self.lines):
            return self.lines[index]
        return self.current

    @property
    def first_number(self) -> int:
        """Absolute number (0-based) of ``line(0)``: lines fall off the front when full."""
        return self.committed - len(self.lines)

    def plain_lines(self) -> list[str]:
        """All shown lines without escapes (for copying and tests)."""
        return [strip_escapes(self.line(i)) for i in range(len(self))]


def strip_escapes(text: str) -> str:
    return _ESCAPE.sub("", text)
