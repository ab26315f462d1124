"""A thread-safe inbox between the controller's reader thread and the UI thread.

The reader thread calls :meth:`EventInbox.put` with each event batch; only the first
batch after a drain asks the caller to post a message, so however fast events arrive
the app's queue holds at most one :class:`~.messages.EventsArrived` and the UI drains
everything that accumulated in one go (the "mergeable message" pattern).
"""

from __future__ import annotations

import threading
from typing import Generic, TypeVar

T = TypeVar("T")


class EventInbox(Generic[T]):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[T] = []
        self._pending = False

    def put(self, batch: list[T]) -> bool:
        """Add a batch; True when the caller must post a wake-up message."""
        with self._lock:
            self._items.extend(batch)
            if self._pending:
                return False
            self._pending = True
            return True

    def drain(self) -> list[T]:
        """Everything that arrived; the next ``put`` asks for a new message."""
        with self._lock:
            items, self._items = self._items, []
            self._pending = False
            return items
