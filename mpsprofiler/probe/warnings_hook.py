"""Observe the warnings the script shows, without changing which ones are shown.

Python routes every warning that passes the filters (the user's filters included)
through ``warnings._showwarnmsg``, from both the Python and the C implementation. We
wrap that one function and call the original, so output, filters and a user's own
``showwarning`` stay exactly as they were.

Counts are exact: a repeat costs one dict update, and what changed since the last
``warning`` event goes out at the channel's next flush and at exit (not every repeat:
a warning in a hot loop must not flood the pipe). Bounded: the first 200 distinct
messages are kept with their texts; past that only how many other distinct messages
there were, and how often they were shown, is sent (``dropped_distinct`` /
``dropped_count``), so a view can say that the list is incomplete.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from .. import events
from ..events.payloads import WarningFields

MAX_DISTINCT = 200
MAX_DROPPED_KEYS = 100_000
"""Distinct messages past the cap are told apart by hash, up to this many (then the
number of distinct ones dropped is a lower bound; their count stays exact)."""

Key = tuple[str, str]


class WarningsHook:
    """The installed wrapper; calling the object uninstalls it."""

    def __init__(self, emit: Callable[..., None], on_error: Callable[[str, BaseException], None],
                 enabled: Callable[[], bool] | None) -> None:
        self._emit = emit
        self._on_error = on_error
        self._enabled = enabled
        self._counts: dict[Key, int] = {}
        self._sent: dict[Key, int] = {}
        self._first: dict[Key, WarningFields] = {}
        self._dropped_keys: set[int] = set()
        self.dropped_distinct = 0
        self.dropped_count = 0
        self._dropped_sent = (0, 0)
        self._changed = False
        self._original: Any = None
        self._wrapper: Any = None

    def install(self) -> WarningsHook:
        original = getattr(warnings, "_showwarnmsg", None)
        if original is None:
            return self
        self._original = original
        hook = self

        def _showwarnmsg(msg: Any) -> None:
            try:
                if hook._enabled is None or hook._enabled():
                    hook.record(msg)
            except Exception as exc:
                hook._on_error("warnings", exc)
            original(msg)  # outside the try: what the user's showwarning raises is theirs

        self._wrapper = _showwarnmsg
        warnings._showwarnmsg = _showwarnmsg  # type: ignore[attr-defined]
        return self

    def __call__(self) -> None:
        if self._wrapper is not None and getattr(warnings, "_showwarnmsg", None) is self._wrapper:
            warnings._showwarnmsg = self._original  # type: ignore[attr-defined]

    def record(self, msg: Any) -> None:
        text = str(msg.message)
        category = getattr(msg.category, "__name__", str(msg.category))
        key = (category, text[:300])
        counts = self._counts
        count = counts.get(key)
        if count is None:
            if len(counts) >= MAX_DISTINCT:
                self.dropped_count += 1
                mark = hash(key)
                if mark not in self._dropped_keys and len(self._dropped_keys) < MAX_DROPPED_KEYS:
                    self._dropped_keys.add(mark)
                    self.dropped_distinct = len(self._dropped_keys)
                self._changed = True
                return
            counts[key] = 1
            fields: WarningFields = {
                "category": category,
                "message": text[:2000],
                "filename": str(msg.filename),
                "lineno": msg.lineno,
                "count": 1,
            }
            self._first[key] = fields
            self._sent[key] = 1
            self._emit(events.KIND_WARNING, **fields)  # the first one at once: the view shows it
            return
        counts[key] = count + 1
        self._changed = True

    def flush(self) -> None:
        """Send the counts that changed since they were last sent (any thread)."""
        if not self._changed:
            return
        self._changed = False
        for key, count in list(self._counts.items()):
            if self._sent.get(key) != count:
                self._sent[key] = count
                self._emit(events.KIND_WARNING, **{**self._first[key], "count": count})
        dropped = (self.dropped_distinct, self.dropped_count)
        if dropped != self._dropped_sent and dropped[1]:
            self._dropped_sent = dropped
            self._emit(events.KIND_WARNING, category="", message="", dropped_distinct=dropped[0],
                       dropped_count=dropped[1])


def install(
    emit: Callable[..., None],
    on_error: Callable[[str, BaseException], None],
    enabled: Callable[[], bool] | None = None,
) -> WarningsHook:
    """Wrap ``warnings._showwarnmsg``; ``enabled()`` False (instrument switched off)
    makes the wrapper a plain pass-through. Returns the hook: call it to uninstall,
    ``flush()`` it to send the counts that changed."""
    return WarningsHook(emit, on_error, enabled).install()
