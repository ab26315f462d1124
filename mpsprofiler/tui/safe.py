"""Text from the script is data, never markup.

Output, warnings, argv, exception messages, paths and recorded values can contain
anything, ``[/x]`` included; Rich and Textual read ``[...]`` in a plain ``str`` as a
style tag and raise ``MarkupError`` on a closing tag they did not open, at render time,
where nothing can catch it. Every widget that shows foreign text therefore gets a
:class:`~rich.text.Text` (never parsed) or an escaped string, and a value a view cannot
format is shown as it was recorded.
"""

from __future__ import annotations

import math
from typing import Any

from rich.text import Text


def raw(value: Any, style: str = "") -> Text:
    """``value`` as it is: a Text is never read as markup."""
    return Text(str(value), style=style)


def escape(value: Any) -> str:
    """For the few places that take Textual content markup (labels that mix our own
    styles with foreign text)."""
    from textual.markup import escape as _escape

    return _escape(str(value))


def fmt_count(value: Any) -> str:
    """``12,345``; a recorded value that is not a whole number is shown raw."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    try:
        return f"{value:,.0f}" if isinstance(value, float) else f"{value:,}"
    except (ValueError, OverflowError):
        return str(value)


def finite(value: Any) -> float | None:
    """A number a chart can place, or None (NaN, inf, strings and bools are skipped)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None
