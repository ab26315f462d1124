"""Objects of the script's the probe has seen, remembered without keeping them alive.

The probe must hold nothing of the user's: a DataLoader kept in a dict outlives the
script's last reference, and with ``persistent_workers=True`` its worker processes
with it (one set per loader ever made). An id alone is not enough either: once an
object dies, CPython reuses its address for the next one of the same size, and a new
loader would pass for the old one. So each entry is an id with a weak reference,
dropped by the reference's callback when the object dies; an object that takes no weak
reference is remembered by id only (never by the object itself).
"""

from __future__ import annotations

import weakref
from typing import Any

MAX_ENTRIES = 10_000
"""Objects that take no weak reference are never forgotten: a bound on them."""


class WeakIds:
    """A set of live objects by identity; ``add`` numbers each new one (1, 2, ...)."""

    def __init__(self) -> None:
        self._refs: dict[int, weakref.ref[Any] | None] = {}
        self.count = 0
        """How many distinct objects were added, dead ones included."""

    def add(self, obj: Any) -> int:
        """The object's number if it is new, 0 if it was seen (and is still alive)."""
        key = id(obj)
        if key in self._refs:
            ref = self._refs[key]
            if ref is None or ref() is obj:
                return 0
        if len(self._refs) >= MAX_ENTRIES:
            self._refs.clear()
        refs = self._refs

        def forget(dead: weakref.ref[Any], key: int = key) -> None:
            if refs.get(key) is dead:
                del refs[key]

        try:
            self._refs[key] = weakref.ref(obj, forget)
        except TypeError:  # no weak references: by id alone
            self._refs[key] = None
        self.count += 1
        return self.count

    def __contains__(self, obj: Any) -> bool:
        key = id(obj)
        if key not in self._refs:
            return False
        ref = self._refs[key]
        return ref is None or ref() is obj

    def __len__(self) -> int:
        return len(self._refs)
