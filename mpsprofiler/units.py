"""Human formatting of seconds, bytes and shares, shared by every view; plain or coloured
text tables for the command-line views."""

from __future__ import annotations

from typing import Any


def fmt_seconds(value: float | None) -> str:
    if value is None:
        return "–"
    v = float(value)
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
    v = float(value)
    sign = "-" if v < 0 else ""
    v = abs(v)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if v < 1024:
            return f"{sign}{v:.0f} {unit}" if unit == "B" else f"{sign}{v:.1f} {unit}"
        v /= 1024
    return f"{sign}{v:.1f} TiB"


def fmt_pct(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value * 100:.0f}%"


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
