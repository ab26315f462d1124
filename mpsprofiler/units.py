"""Human formatting of seconds, bytes and shares, shared by every view; plain or coloured
text tables for the command-line views."""

from __future__ import annotations

import math
from typing import Any


def finite(value: Any) -> float | None:
    """``value`` as a finite float, or None when it is no number (a damaged or hand-edited
    recording may hold ``"NaN"``, ``"12M"``, a list, 1e308 grown to infinity)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        v = float(value)
    except OverflowError:  # an int past float's range
        return None
    return v if math.isfinite(v) else None


def raw(value: Any, limit: int = 40) -> str:
    """A value no formatter understands, shown as it was recorded (shortened)."""
    text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def fmt_seconds(value: float | None) -> str:
    if value is None:
        return "–"
    v = finite(value)
    if v is None:
        return raw(value)
    if v >= 1e12:  # no run lasts 30,000 years: a damaged figure, shown as a number
        return f"{v:.3g} s"
    if v < 1e-3:
        return f"{v * 1e6:.0f} µs"
    if v < 1:
        return f"{v * 1e3:.1f} ms"
    if v < 120:
        return f"{v:.2f} s"
    minutes, seconds = divmod(int(v), 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def fmt_bytes(value: float | None) -> str:
    if value is None:
        return "–"
    v = finite(value)
    if v is None:
        return raw(value)
    sign = "-" if v < 0 else ""
    v = abs(v)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if v < 1024:
            return f"{sign}{v:.0f} {unit}" if unit == "B" else f"{sign}{v:.1f} {unit}"
        v /= 1024
    return f"{sign}{v:.1f} TiB"


GIB = 1024**3
MIB = 1024**2


def chart_bytes_unit(largest: float) -> tuple[float, str]:
    """The unit of a chart of bytes (the TUI's and the reports' alike): GiB once the largest
    value reaches 1 GiB, else MiB. Returns (divisor, suffix)."""
    return (GIB, "GiB") if largest >= GIB else (MIB, "MiB")


def fmt_pct(value: float | None) -> str:
    if value is None:
        return "–"
    v = finite(value)
    if v is None:
        return raw(value)
    return f"{v * 100:.0f}%"


def plural(n: Any, singular: str, many: str | None = None) -> str:
    """``1 run``, ``3 runs``, ``1 batch`` / ``2 batches`` (``many``: an irregular plural)."""
    word = singular if n == 1 else (many if many is not None else singular + "s")
    return f"{n} {word}"


def agree(n: Any, one: str, many: str) -> str:
    """The verb that goes with ``n``: ``agree(1, "keeps", "keep")`` -> ``keeps``."""
    return one if n == 1 else many


def ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, ``11th``-``13th``, ``21st``, ``131st``."""
    if 10 <= n % 100 <= 20:
        suffix = "th"
    else:
        suffix = {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def text_console(color: bool, width: int | None) -> Any:
    """A rich Console that writes into a string: ANSI colours on a terminal, plain text
    (no highlighting, no emoji) in a pipe. Read it back with :func:`console_text`."""
    import io

    from rich.console import Console

    return Console(file=io.StringIO(), force_terminal=color, no_color=not color,
                   color_system="standard" if color else None, width=width, highlight=False, emoji=False)


def console_text(console: Any) -> str:
    """What a :func:`text_console` holds, without trailing spaces on its lines."""
    return "\n".join(line.rstrip() for line in console.file.getvalue().splitlines())
