"""Observe the warnings the script shows, without changing which ones are shown.

Python routes every warning that passes the filters (the user's filters included)
through ``warnings._showwarnmsg``, from both the Python and the C implementation. We
wrap that one function and call the original, so output, filters and a user's own
``showwarning`` stay exactly as they were. Bounded: after 200 distinct messages only
counts are kept.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from .. import events
from ..events.payloads import WarningFields

MAX_DISTINCT = 200


def install(
    emit: Callable[..., None],
    on_error: Callable[[str, BaseException], None],
    enabled: Callable[[], bool] | None = None,
) -> Callable[[], None]:
    """Wrap ``warnings._showwarnmsg``; ``enabled()`` False (instrument switched off)
    makes the wrapper a plain pass-through. Returns the uninstaller."""
    original = getattr(warnings, "_showwarnmsg", None)
    if original is None:
        return lambda: None
    seen: dict[tuple[str, str], int] = {}

    def _record(msg: Any) -> None:
        text = str(msg.message)
        category = getattr(msg.category, "__name__", str(msg.category))
        key = (category, text[:300])
        count = seen.get(key, 0) + 1
        if count == 1 and len(seen) >= MAX_DISTINCT:
            return
        seen[key] = count
        if count == 1 or count in (10, 100, 1000) or count % 10000 == 0:
            fields: WarningFields = {
                "category": category,
                "message": text[:2000],
                "filename": str(msg.filename),
                "lineno": msg.lineno,
                "count": count,
            }
            emit(events.KIND_WARNING, **fields)

    def _showwarnmsg(msg: Any) -> None:
        try:
            if enabled is None or enabled():
                _record(msg)
        except Exception as exc:
            on_error("warnings", exc)
        original(msg)  # outside the try: what the user's showwarning raises is theirs

    warnings._showwarnmsg = _showwarnmsg  # type: ignore[attr-defined]

    def uninstall() -> None:
        if getattr(warnings, "_showwarnmsg", None) is _showwarnmsg:
            warnings._showwarnmsg = original  # type: ignore[attr-defined]

    return uninstall
