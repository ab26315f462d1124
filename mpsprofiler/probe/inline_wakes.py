"""The inline channel's wakes outside the steps: from the garbage collector.

While the event channel has no thread (probe/channel.py), its wakes run on the training
thread at the step boundary. Before the first step (``import torch``, model building) and
outside the steps (a long evaluation, a 3 s step) no boundary comes, yet a live view must
get the events (hello, env, memory samples) as they happen. Whatever Python code runs
there allocates objects, so the collector's young generation runs every few hundred
allocations (``gc.get_threshold()``); a ``gc.callbacks`` entry is one cheap compare at each
collection, and wakes only when no boundary woke the channel for two intervals.

Such a wake comes inside arbitrary code, the probe's own included, so it is light: the
``beside`` tasks (the memory sampler) and the write, never the ``on_flush`` drains (steps,
DataLoader sums: their boundary wake or the exit sends them), and none at all while one of
the probe's locks is held by this thread (the channel's, the sampler's, the descriptor
lock: a collection inside the script's ``os.close`` wrapper). Its time is taken off the step
in progress (its start moves), as the boundary's wake.

A signal's Python handler runs at the next check of the interpreter, which may be inside the
wake: what it raises there (Ctrl-C's ``KeyboardInterrupt``, a SIGTERM handler's
``SystemExit``) the collector would print as "Exception ignored in" and drop (as it does in
any ``__del__``). So it is raised again in the script's own code, by a one-shot trace
function (``sys.settrace``: an exception a trace function raises propagates into the traced
frame) at the interrupted frame's next line or the next call; under a tracer of its own (a
debugger, coverage) the wakes stop instead of replacing it, and the exception is dropped as
the collector would have.
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from . import fdguard


def install(channel: Any, tracker: Any, sampler: Callable[[], Any]) -> Callable[[], None]:
    """Wake ``channel`` (inline) from the collector; returns the uninstaller. ``sampler``
    gives the memory sampler (or None), whose lock a wake must not wait for."""
    clock = time.perf_counter

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase != "stop" or clock() < channel.due + channel.interval:
            return  # a boundary woke it lately (or threaded: due is infinite)
        try:
            memory = sampler()
            if channel.busy() or fdguard.owned_here() or (memory is not None and memory.busy()):
                return
            start = clock()
            tracker._start += channel.tick(drain=False) - start  # the step's time without the wake
        except Exception:
            pass
        except BaseException as exc:  # a signal handler's, raised inside the wake
            if not raise_in_script(exc, sys._getframe(1)):
                uninstall()

    gc.callbacks.append(on_gc)

    def uninstall() -> None:
        try:
            gc.callbacks.remove(on_gc)
        except ValueError:
            pass

    return uninstall


def raise_in_script(exc: BaseException, frame: FrameType | None) -> bool:
    """Raise ``exc`` at ``frame``'s next line or the next call of a Python function, not
    here (see the module docstring); False where a tracer is in use already."""
    if sys.gettrace() is not None:
        return False

    def once(f: FrameType, event: str, arg: Any) -> Any:
        sys.settrace(None)
        if frame is not None:
            frame.f_trace = None
        raise exc

    if frame is not None:
        frame.f_trace = once
    sys.settrace(once)
    return True
