"""A change the op sampler must make outside any op, run at the next point that is.

The sampler's dispatch mode and its global module hooks can only be removed where no op
is running: inside ``__torch_dispatch__`` torch has popped the mode and pushes it back when
the handler returns. A sample cut short (too long, or a failure) leaves its removal
pending here; the next module call (``ModuleTracker._pre``) or the start of the next
backward pass on the sampling thread (``backward.install``'s engine wrapper, called from
Python before the autograd engine runs) carries it out. Without the second, a sample cut
in the forward pass kept the mode through the whole backward pass, where no module is
called: every op of a deep graph's backward still paid the mode (~6 µs an op).
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class SafePoint:
    """One pending change and the thread it belongs to (the dispatch stack is per thread)."""

    __slots__ = ("pending", "_thread", "_on_error")

    def __init__(self) -> None:
        self.pending: Callable[[], None] | None = None
        """Read at every backward pass (one attribute read while nothing is pending)."""
        self._thread: int | None = None
        self._on_error: Callable[[BaseException], None] | None = None

    def set(self, change: Callable[[], None], on_error: Callable[[BaseException], None]) -> None:
        """Run ``change`` at the next safe point of the calling thread."""
        self._thread = threading.get_ident()
        self._on_error = on_error
        self.pending = change

    def clear(self) -> None:
        self.pending = None

    def run(self) -> None:
        """Carry out the pending change, on its own thread only; errors go to its owner."""
        change = self.pending
        if change is None or threading.get_ident() != self._thread:
            return
        self.pending = None
        try:
            change()
        except Exception as exc:
            if self._on_error is not None:
                self._on_error(exc)
