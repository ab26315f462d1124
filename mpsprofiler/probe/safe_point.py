"""Work the op sampler leaves for a point outside any op, run there once, on its own thread.

The sampler's dispatch mode and its global module hooks can only be removed where no op
is running: inside ``__torch_dispatch__`` torch has popped the mode and pushes it back when
the handler returns. Two such points hold a ``SafePoint``: the module tracker's forward
pre-hook (``ModuleTracker.release``: the next module call) and the backward hook's engine
wrapper (``Probe.safe_point``: the start of the next outermost backward pass, called from
Python before the autograd engine runs). A sample cut short (too long, or a failure) sets
its removal on both; without the second, a sample cut in the forward pass kept the mode
through the whole backward pass, where no module is called: every op of a deep graph's
backward still paid the mode (~6 µs an op). The backward one also tells the sampler that
its step's backward pass began, and begins a sample armed to start there
(``OpAccountant._arm``). The dispatch stack is per thread: another thread's call runs nothing.
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
