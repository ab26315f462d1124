"""The inline channel's wakes outside the steps: from the garbage collector and the
DataLoader's fetches.

While the event channel has no thread (probe/channel.py), its wakes run on the training
thread at the step boundary. Before the first step (``import torch``, model building) and
outside the steps (a long evaluation, a 3 s step) no boundary comes, yet a live view must
get the events (hello, env, memory samples) as they happen. Whatever Python code runs
there allocates objects, so the collector's young generation runs every few hundred
allocations (``gc.get_threshold()``); a ``gc.callbacks`` entry is one cheap compare at each
collection, and wakes only when no boundary woke the channel for two intervals. A loop that
frees what it allocates (an evaluation: the young generation counts allocations minus
deallocations) runs no collection; there the end of each DataLoader fetch asks the same
(the tracker's ``fetch_listeners``: one call and compare a batch while inline).

Such a wake (the collector's above all) comes inside arbitrary code, the probe's own
included: none while one of the probe's locks is held by this thread (the channel's, the
sampler's, the step tracker's, the DataLoader sums', the descriptor lock: a collection
inside the script's ``os.close`` wrapper); otherwise it does what the channel's thread
does, between any two steps of the training's code (the drains included, so the steps
closed before a long evaluation go out during it, and a process killed then loses no more
than the threaded channel's). Its time is taken off the step in progress (its start moves),
as the boundary's wake.

A signal's Python handler runs at the next check of the interpreter, which may be inside the
wake: what it raises there (Ctrl-C's ``KeyboardInterrupt``, a SIGTERM handler's
``SystemExit``) the collector would print as "Exception ignored in" and drop (as it does in
any ``__del__``). So it is raised again in the script's own code, by a one-shot trace
function (``sys.settrace``: an exception a trace function raises propagates into the traced
frame) at the next line of the interrupted frame or of a caller; under a tracer of its own
(a debugger, coverage) the wakes stop instead of replacing it, and the exception is dropped
as the collector would have.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from . import fdguard


def wake_when_overdue(channel: Any, tracker: Any, busy: Callable[[], bool]) -> Callable[[], None]:
    """A wake of ``channel`` (inline) where no boundary woke it for two intervals, none
    while ``busy()`` (a lock of the probe's is held on this thread); the step in progress
    does not count its time. A signal handler's exception raised inside it propagates (to
    the caller: see :func:`install`)."""
    clock = time.perf_counter
    ident, main = threading.get_ident, threading.get_ident()

    def wake() -> None:
        if clock() < channel.due + channel.interval:
            return  # a boundary woke it lately (or threaded: due is infinite)
        if ident() != main:
            return  # a thread the script started: the training thread's next wake starts ours
        try:
            if busy() or fdguard.owned_here():
                return
            start = clock()
            tracker.moved_by_wake(start, channel.tick() - start)  # the step's time without the wake
        except Exception:
            pass

    return wake


def install(channel: Any, tracker: Any, busy: Callable[[], bool]) -> Callable[[], None]:
    """Wake ``channel`` (inline) from the collector and at the end of every DataLoader fetch
    (see :func:`wake_when_overdue`); returns the uninstaller."""
    wake = wake_when_overdue(channel, tracker, busy)
    off: list[bool] = []

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase != "stop" or off:
            return
        try:
            wake()
        except BaseException as exc:  # a signal handler's, raised inside the wake
            if not raise_in_script(exc, sys._getframe(1)):
                off.append(True)  # (not removed here: the collector would skip the next callback)

    gc.callbacks.append(on_gc)
    tracker.fetch_listeners.append(wake)  # (a hook's call: a signal's exception propagates as from any)

    def off_fetches() -> None:
        # a new list: the tracker may be iterating the old one (a wake there started the thread)
        tracker.fetch_listeners = [fn for fn in tracker.fetch_listeners if fn is not wake]

    # threaded from now on: the fetches' call goes; the collector's stays (one compare a
    # collection; never removed from inside a callback, which makes the collector skip the next)
    channel.when_threaded(off_fetches)

    def uninstall() -> None:
        try:
            gc.callbacks.remove(on_gc)
        except ValueError:
            pass
        off_fetches()

    return uninstall


def raise_in_script(exc: BaseException, frame: FrameType | None) -> bool:
    """Raise ``exc`` at the next line that ``frame`` (the code the collector interrupted)
    or one of its callers runs, not here (see the module docstring); False where a tracer is
    in use already or there is no frame. Never at a call: the next call may be another
    collector callback, which would drop it as ours would."""
    if sys.gettrace() is not None or frame is None:
        return False
    frames: list[FrameType] = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back

    def once(f: FrameType, event: str, arg: Any) -> Any:
        if event != "line":
            return once
        sys.settrace(None)
        for each in frames:
            each.f_trace = None
        frames.clear()
        raise exc

    for each in frames:
        each.f_trace = once
    sys.settrace(_no_new_frame)  # (line events need a tracer; the frames called meanwhile get none)
    return True


def _no_new_frame(frame: FrameType, event: str, arg: Any) -> None:
    return None
