"""``--max-steps`` / ``--max-seconds``: end the script cleanly at a step boundary.

How the script is ended: right after the step that reaches the limit (when the
optimizer step hook returns, when the next batch is requested, or when
``mpsprofiler.step()`` returns), the probe
raises :class:`StepLimitReached`, a ``SystemExit`` with status 0, on the training
thread. That is what ``sys.exit()`` at that line would do: ``finally`` blocks, context
managers and ``atexit`` functions run, DataLoader workers are shut down, and the
process exits 0 without a traceback. ``except Exception`` in the script does not catch
it (``SystemExit`` is no ``Exception``); a script that catches ``BaseException`` and
keeps training simply runs on (the limit fires once). A ``cut`` event records the
limit, so the summary says the run was cut rather than finished.

A loop on another thread is never interrupted: ending a thread is not ending the run.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from .. import events
from ..events.payloads import CutFields


class StepLimitReached(SystemExit):
    """The run reached ``--max-steps`` / ``--max-seconds``: exit 0 at a step boundary."""

    def __init__(self) -> None:
        super().__init__(0)


class StepLimit:
    def __init__(self, max_steps: int | None, max_seconds: float | None, emit: Callable[..., None],
                 clock: Callable[[], float], closing: Callable[[], bool]) -> None:
        self.max_steps = max_steps
        self.max_seconds = max_seconds
        self._emit = emit
        self._clock = clock
        self._closing = closing
        self._pid = os.getpid()
        self._first: float | None = None
        self.cut = False
        self.pending = False

    def check(self) -> None:
        """Raise once the limit was reached; the probe calls this after each step-tracker
        hook has returned (optimizer step, batch fetch, ``mpsprofiler.step()``), so the
        tracker's state is complete when the script ends."""
        if self.pending:
            self.pending = False
            raise StepLimitReached()

    def listener(self, next_step: int, last: float) -> None:
        """Called by the step tracker at every boundary with the number of closed steps:
        marks the limit as reached (raising here would leave the tracker mid-update)."""
        now = self._clock()
        if self._first is None:
            self._first = now - last
        if self.cut or self._closing() or os.getpid() != self._pid:
            return
        if threading.current_thread() is not threading.main_thread():
            return
        reason = None
        if self.max_steps is not None and next_step >= self.max_steps:
            reason = "max_steps"
        elif self.max_seconds is not None and now - self._first >= self.max_seconds:
            reason = "max_seconds"
        if reason is None:
            return
        self.cut = True
        self.pending = True
        fields: CutFields = {"reason": reason, "steps": next_step, "max_steps": self.max_steps,
                             "max_seconds": self.max_seconds, "seconds": round(now - self._first, 6)}
        self._emit(events.KIND_CUT, **fields)
