"""The DataLoader iterator's ``__next__`` wrapper: a steady batch in one Python frame.

Why (issue 34): every batch ran four frames of the probe's Python, the wrapper,
``StepTracker.on_fetch_start``, ``StepTracker.on_fetch_end`` and ``LoaderSites.on_fetch``
(~271 bytecodes a batch, benchmarks/RESULTS.md session 57 part B), where most batches of a
training loop need none of their decisions: no step closes at the fetch, the fetch clocks
are not read, the loader's count is not due for more. Such a batch (the *steady* one) is
done in the wrapper's own frame, with the very operations of those methods in the same
order (the same step rows and per-loader sums, float for float:
``benchmarks/fetch_path_equality.py`` drives this wrapper against the methods); any other
batch calls the methods, which remain the one general path (and what the unit tests drive).

A fetch starts steady when its count is below the next one the fetch clocks read
(``StepTracker._read_at``: the first fetches, those due by ``READ_GAPS``, any after a long wait;
so a run's first fetch is never steady), the tracker's mode is not one where a fetch may
close a step (``dataloader``/``none``) and no fault is injected; else ``on_fetch_start``
runs. Every fetch whose clocks were not read (a steady one, or one ``on_fetch_start`` did
not read) ends here when a batch came (else ``on_fetch_end``), and its batch is logged here
for the per-loader sums when it comes from an iterator already timed (else
``LoaderSites.on_fetch``); a loader count that falls due calls ``LoaderSites._due``.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Set
from typing import Any

from .cputime import LONG_FETCH, READ_AFTER
from .step_aggregate import merge_fetch
from .steps import _BACKWARD_COUNTED, _FETCH_COUNTED, FETCH, StepTracker

INSTRUMENT = "dataloader"


class _EveryMode:
    """Holds every mode of the step tracker (``in`` is always true)."""

    def __contains__(self, mode: object) -> bool:
        return True


_EVERY_MODE = _EveryMode()


def fetch_wrapper(tracker: StepTracker, sites: Any, pins: Any, orig_next: Callable[[Any], Any],
                  disabled: Set[str], fault: Callable[[str], None] | None,
                  fail: Callable[[str, BaseException], None], check_limit: Callable[[], None] | None,
                  perf_counter: Callable[[], float], first_caller: Callable[[Any], str]) -> Callable[[Any], Any]:
    """The ``_BaseDataLoaderIter.__next__`` replacement over ``orig_next``; ``sites`` is the
    probe's ``loader_sites.LoaderSites``, ``pins`` its ``copies.PinCheck``, ``perf_counter``
    the clock a batch's per-loader seconds start from (the tracker's own clock ends them),
    ``first_caller`` the module of a frame (the caller of the run's first batch: once)."""
    fetch_start, fetch_end, on_fetch = tracker.on_fetch_start, tracker.on_fetch_end, sites.on_fetch
    clock = tracker._clock
    timed = sites._timed
    get_ident = threading.get_ident
    asynchronous = tracker.backend.asynchronous
    # the modes whose fetches start on the general path: every mode where a fault is injected
    counted = _FETCH_COUNTED if fault is None else _EVERY_MODE

    def safe(fn: Callable[[], object]) -> None:
        try:
            fn()
        except Exception as exc:
            fail(INSTRUMENT, exc)

    def __next__(it: Any) -> Any:
        if INSTRUMENT in disabled:
            return orig_next(it)
        n = tracker._fetches + 1
        try:
            if n < tracker._read_at and tracker.mode not in counted:
                # the steady start: on_fetch_start's work where no step closes and no clock is read
                now = clock()
                tracker._fetches = n
                FETCH.thread = get_ident()
                if asynchronous:
                    tracker._mark_queued_work()
                reading = None
            else:
                if fault is not None:
                    fault(INSTRUMENT)
                if tracker.first_fetch_by is None:  # once: who fetches (a look-ahead? steps.LOOK_AHEAD)
                    tracker.first_fetch_by = first_caller(sys._getframe(1))
                now, reading = fetch_start()
        except Exception as exc:
            fail(INSTRUMENT, exc)
            return orig_next(it)
        if check_limit is not None:
            check_limit()
        t0 = perf_counter()
        try:
            batch = orig_next(it)
        except StopIteration:
            safe(lambda: fetch_end((now, reading), False))
            raise
        # one try for the rest (this runs at every batch): the first failure switches the
        # instrument off, and the others would only have fed an instrument that is off
        try:
            if reading is None:
                # on_fetch_end's work for a fetch whose clocks were not read
                FETCH.thread = None
                end = clock()
                wait = end - now
                if wait < LONG_FETCH:
                    ratio = tracker._fetch_clock.ratios[0]
                else:
                    fetch_clock = tracker._fetch_clock
                    if wait >= READ_AFTER:
                        fetch_clock.after_wait = True
                        tracker._read_at = 0
                    ratio = fetch_clock.ratios[1]
                if ratio is None:
                    cpu, runq = wait, None
                else:
                    total, cpu_s, runq_s = ratio
                    cpu = wait * cpu_s / total
                    if cpu >= wait:
                        cpu = wait
                    runq = None if runq_s is None else wait * runq_s / total
                idle = tracker._read_idle() if tracker._event_pending else None
                mode = tracker.mode
                if tracker._seen if mode == "optimizer" else mode in _BACKWARD_COUNTED and tracker._bwd_seen:
                    fetch: list[Any] = [wait, cpu, runq, 1, idle]
                    carry = tracker._carry
                    tracker._carry = fetch if carry is None else merge_fetch(carry, fetch)
                else:
                    tracker._wait += wait
                    tracker._wait_cpu += cpu
                    tracker._batches += 1
                    if runq is not None:
                        wait_runq = tracker._wait_runq
                        tracker._wait_runq = runq if wait_runq is None else wait_runq + runq
                    if idle is not None:
                        tracker._idle = idle if tracker._idle is None else max(tracker._idle, idle)
                if tracker.fetch_listeners:
                    for listener in tracker.fetch_listeners:
                        listener()
            else:
                end = fetch_end((now, reading), True)  # the tracker's clock is perf_counter (probe.py)
            # LoaderSites.on_fetch's work for a timed iterator's batch that is not due
            entry = timed.get(id(it))
            if entry is not None and it is entry[0]():
                sites._log.extend((entry, end - t0, end, tracker.begun, it._num_yielded))
                site = entry[1]
                taken = site.taken = site.taken + 1
                if taken >= site.due:
                    sites._due(it, entry, site, taken, batch)
            else:
                on_fetch(it, end - t0, batch, end, tracker.begun)
            if pins.open and tracker.backend.kind == "cuda":
                pins.on_batch(it, batch)  # pageable batches on CUDA (probe/copies.py)
        except Exception as exc:
            fail(INSTRUMENT, exc)
        return batch

    return __next__
