"""Step boundaries and data wait, measured on the training thread at a few µs per step.

Where a step ends, in order of precedence:

1. ``mpsprofiler.step()`` called by the script (custom loops): once called, it alone counts.
2. torch.optim's global optimizer step post-hook. Several optimizers stepping in one
   iteration (a GAN's generator and discriminator) are one step: the set of optimizers
   of the first iteration is learnt, and a step closes when every one of them has
   stepped, or when one steps a second time.
3. Backward passes, in loops without an optimizer (manual ``p.data.add_(p.grad, ...)``
   updates): the autograd engine's entry (see ``probe/backward.py``). Like optimizers,
   the backward call sites of the first iteration are learnt (a GAN's two or three
   ``.backward()`` lines are one step); a step closes when every site has run, or when
   one runs again after the loop zeroed its gradients. A line that runs again without
   that (gradient accumulation) adds a micro-batch to the step, and passes inside an
   optimizer step (LBFGS's closure) belong to that step.
4. Loops without either (inference): each DataLoader batch after the first starts a new step.
   Those steps stay provisional (held, not sent, no listener called) for the first
   ``PROVISIONAL`` of them: batches fetched before a run's first backward pass or
   optimizer step are not steps of a training loop. accelerate's ``DataLoaderShard`` (so
   every Hugging Face Trainer) fetches one batch ahead to know the last one, the Trainer
   fetches all ``gradient_accumulation_steps`` batches of an update before its first
   forward, and Lightning runs 2 sanity-check validation batches before training: each
   of those fetches would otherwise have closed a step (41 of 40, 44 of 40, 62 of 60).
   When the first backward pass or optimizer step comes, the provisional steps are
   folded back into step 0 (their data wait with them); past ``PROVISIONAL`` batches,
   or at exit, the loop is taken to be one without training and they are confirmed.

Optimizers are told apart by the parameters they update (the first parameter's id), not
by the optimizer object's id: a script that builds a new optimizer every iteration makes
CPython reuse the freed object's address, and two alternating ids made one step of two.

Data wait is the time spent inside DataLoader iterators' ``__next__``, with the CPU time
the training thread spent there and (Linux) the time it waited for a free core (see
:mod:`.cputime`). A fetch that follows the last optimizer step of an iteration belongs to
the next step even before the step's end is known (the first iteration, where the set
of optimizers is still being learnt). On asynchronous
devices a stream event recorded when a fetch begins (behind all the work queued so far)
and queried when it ends tells whether the device ran dry (idle) while the host waited.

A closed step is one tuple appended (the training thread's whole share); the channel
thread sends them every ~0.25-0.5 s as one ``steps`` event, packed rows that the reader folds
into columns; past ``detail_limit`` steps only exact aggregates (count, sums, a log-bucket
histogram) and one sample step per batch are recorded, so any run length gives a bounded
recording (how: :mod:`.step_aggregate`). Fast steps switch to aggregates earlier (see ``FAST_STEP``): every
step sent one by one costs the live view ~4 µs to decode and fold, 1% of a core at
2,000 steps/s, for figures the aggregates give exactly.
"""

from __future__ import annotations

import bisect
import math
import operator
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from .. import events
from ..devices import DeviceBackend
from .appended import take
from .cputime import EXACT_FETCHES, LONG_FETCH, READ_AFTER, READ_GAPS, FetchClock, ThreadClock
from .step_aggregate import ALLOC_EVERY, columns, fold_columns, merge_fetch, steps_payload

DETAIL_LIMIT = 20_000
FAST_AFTER = 2_048
"""Steps always sent one by one, however fast: the session's early window (warm-up,
steady medians, the first batches) holds 512 and a chart's series 2,048."""
FAST_BLOCK = 1_024
FAST_STEP = 0.002
"""Past ``FAST_AFTER``, the first block of ``FAST_BLOCK`` steps whose mean step time is
under this (over 500 steps/s) ends the detail: later steps go as exact aggregates, one
``steps`` event per ~0.25 s as before. Slower steps keep the detail up to ``DETAIL_LIMIT``."""
_get_ident = threading.get_ident
DUE_SPAN = 64
"""Durations of steps between two calls of the due listener kept for it (its due step is at
most this many steps ahead: op accounting's drift check, ``ops_schedule.DRIFT_EVERY``)."""

PROVISIONAL = 64
"""DataLoader-counted steps held until a backward pass or optimizer step says whether the
loop trains (see the module docstring). More than a Lightning sanity check (2 batches) or
a Trainer's accumulation window (typically 1 to 32 batches)."""

_FETCH_COUNTED = frozenset(("none", "dataloader"))
"""Modes in which a fetch may close a step (the DataLoader counts the steps); one set test
at every fetch instead of two comparisons."""
_BACKWARD_COUNTED = frozenset(("none", "backward"))
"""Modes other than ``optimizer`` in which a fetch after the iteration's backward passes
is held for the next step (``_carry``)."""

LOOK_AHEAD = {"accelerate.data_loader": 1}
"""Batches a loader fetches ahead of the one it hands out, by the module that calls the
DataLoader iterator: accelerate's ``DataLoaderShard.__iter__`` (so every Hugging Face
Trainer) fetches the next batch before it yields the current one, to know the last
(accelerate/data_loader.py), so a loop that crashes in its first step has fetched 2."""


class _Fetch:
    """The thread inside a DataLoader iterator's ``__next__`` now, if any (read by the leak
    tracker: tensors a fetch makes may be a batch fetched ahead, see ``ops_leaks``)."""

    __slots__ = ("thread",)

    def __init__(self) -> None:
        self.thread: int | None = None


FETCH = _Fetch()
"""One per process, like the DataLoader hooks that set it. Cleared at every step boundary
too, so a fetch that raised (no ``on_fetch_end``) cannot leave it set."""


class StepTracker:
    def __init__(
        self,
        emit: Callable[..., None],
        backend: DeviceBackend,
        clock: Callable[[], float],
        detail_limit: int = DETAIL_LIMIT,
        origin: float = 0.0,
    ) -> None:
        self._emit = emit
        self.backend = backend
        self._clock = clock
        self._origin = origin
        """Subtracted from ``clock``'s readings where a step's time is sent (the channel
        thread's fold): the probe hands ``time.perf_counter`` itself and its start time
        here, so the ~6 clock reads per step on the training thread are C calls, not
        calls of a Python function that subtracts (issue 34). Durations need no origin."""
        self._detail_limit = detail_limit
        self._detail_end = detail_limit
        """Steps from this index on go as aggregates (``detail_limit``, or earlier for fast steps)."""
        self._block_end: float | None = None
        """End time of the step that began the current block of ``FAST_BLOCK`` steps."""
        self.mode = "none"  # none | dataloader | backward | optimizer | manual
        self.index = 0  # index of the step in progress
        self._start = clock()
        self._wait = 0.0
        self._wait_cpu = 0.0
        self._wait_runq: float | None = None
        self._batches = 0
        self._idle: int | None = None
        self._carry: list[Any] | None = None
        """[wait, cpu, runq, batches, idle] of fetches after this iteration's last optimizer step."""
        self._thread_clock = ThreadClock()
        self._fetch_clock = FetchClock(self._thread_clock)
        self._read_at = 0
        """The fetch count at which the fetch clock is read next (:meth:`_read_start`; 0:
        the next fetch, the run's first or one after a long wait)."""
        self._due_read = EXACT_FETCHES
        """The next fetch count past ``EXACT_FETCHES`` read by the count alone (``READ_GAPS``)."""
        self._gap = 0
        """The index in ``READ_GAPS`` of the gap after ``_due_read``."""
        self._event: Any = None
        self._event_pending = False
        self._cycle: frozenset[int] | None = None
        self._single: int | None = None
        """The one optimizer of a learnt one-optimizer cycle (``on_optimizer_step``'s fast path)."""
        self._seen: set[int] = set()
        self._last_opt_time = 0.0
        self._bwd_cycle: frozenset[Any] | None = None
        self._bwd_seen: set[Any] = set()
        self._last_bwd_time = 0.0
        self.backwards = 0
        self.in_optimizer = False
        """Between an optimizer's step pre- and post-hook."""
        self.closure_step = False
        """An optimizer stepped with a closure (LBFGS): few, long steps."""
        """Backward passes seen (``.backward()``, not ``autograd.grad``), whatever the mode."""
        self._fetches = 0
        self._may_hold = True
        """False once no optimizer step or backward pass can be seen (see no_training_signal)."""
        self._restart = False
        """The steps sent so far were no training steps (see :meth:`_training_begins`): said
        with the next ``steps`` event."""
        self._provisional: float | None = None
        """Start of step 0 while the DataLoader-counted steps are provisional (None: none held)."""
        self.retracted = 0
        """Batches fetched before the first backward pass or optimizer step that were not
        taken as steps (look-ahead, accumulation window, sanity check)."""
        self.begun = 0
        """``index + retracted``, kept as one counter (a retraction moves steps from one to the
        other): the steps begun, read by the DataLoader hook at every batch as an attribute
        (``loader_sites.LoaderSites``'s ``step``), not through a Python function (issue 34)."""
        self.first_fetch_by: str | None = None
        """The module that asked for the run's first batch ("" if not known; set by the
        DataLoader hook, see ``LOOK_AHEAD``)."""
        self._started = False
        self._alloc_read_at = float("-inf")
        self._detailed: list[tuple[Any, ...]] = []
        """Closed steps folded as detail, not sent yet: rows as in ``_rows``, sent packed
        (``events/step_rows.py``: the columns are the reader's work, off this process)."""
        self._rows: list[tuple[Any, ...]] = []
        """Closed steps not folded yet: (i, start, end, wait, batches, idle, alloc, wait_cpu,
        wait_runq, bwd_start, bwd), appended by the training thread, folded by the channel's."""
        self._bwd = 0.0
        self._bwd_start: float | None = None
        self._agg_rows: list[tuple[Any, ...]] = []
        """Closed steps past the detail, not sent yet: rows as in ``_rows``, sent packed; the
        reader aggregates them (``events/step_agg.py``)."""
        self._lock = threading.Lock()
        self.wakes: Any = None
        """The event channel, whose ``wake_spans`` say whether one of its wakes fell in
        a step (:meth:`_slowed_by_wake`); None: no channel."""
        self.inline_channel: Any = None
        """The event channel while its wakes run on the training thread (``Channel.tick``
        at the boundary when ``due``; the next step's start moves by the wake's time)."""
        self._wake_shifts: list[tuple[float, float]] = []
        """(when, seconds) of the wakes outside the boundary that moved the step's start
        (:meth:`moved_by_wake`); :meth:`_close` takes back those after the step's end."""
        self.listeners: list[Callable[[int, float], None]] = []
        """Called with (next step index, last step duration) at every boundary (the device
        timer on asynchronous devices; op accounting is the ``due_listener``)."""
        self.fetch_listeners: list[Callable[[], None]] = []
        """Called when a DataLoader fetch has ended (device timing: probe/device_time.py)."""
        self.due_listener: Callable[[int, float, deque[float]], tuple[float, float]] | None = None
        """Called with (next step index, last step duration, the durations of the steps since its
        last call) only at the boundaries it asks for: it returns the next step index it needs
        and a duration above which a step needs it too (op accounting: its samples, leak checks,
        drift check and the outlier test; ``set_due_listener``). Every other step costs one
        comparison and one append here instead of its call (issue 34); before ``listeners``."""
        self._due_at: float = math.inf
        self._due_above = math.inf
        self._skipped: deque[float] = deque(maxlen=DUE_SPAN)
        self._skip = self._skipped.append
        self.first_optimizer_listeners: list[Callable[[float, bool], None]] = []
        """Called with step 0's time so far and ``closure_step`` at the first optimizer
        step (ops sampler)."""

    # -- boundaries -------------------------------------------------------------
    def _close(self, end: float) -> None:
        """End the step in progress at ``end``: one tuple appended (rounding, columns and
        aggregates are the channel thread's work, see :meth:`_fold`), the state reset, the
        listeners called. Runs at every step: kept to a few dozen bytecodes."""
        FETCH.thread = None
        i = self.index
        start = self._start
        if self._wake_shifts:
            start = self._unshift(start, end)
        alloc = None
        if end - self._alloc_read_at >= ALLOC_EVERY:
            # torch.cuda.memory_allocated builds the allocator's whole stats dict (~0.5 ms):
            # read it at most every ALLOC_EVERY seconds, not at every step
            self._alloc_read_at = end
            try:
                alloc = self.backend.allocated()
            except Exception:
                alloc = None
        # list.append is atomic: the channel thread takes rows from the front (_fold), no lock
        self._rows.append((i, start, end, self._wait, self._batches, self._idle, alloc, self._wait_cpu,
                           self._wait_runq, self._bwd_start, self._bwd))
        self.index = i + 1
        self.begun += 1
        self._start = end
        if self._wake_shifts:  # wakes after the closed step's end: the next step's (see _unshift)
            self._start = end + sum(seconds for _, seconds in self._wake_shifts)
        channel = self.inline_channel
        if channel is not None and end >= channel.due:  # its wake, timed apart from the steps (probe/channel.py)
            # the next step starts later by the wake's time, unless that step's end was read
            # before it (a cycle learnt at this optimizer step closes both steps at its time)
            at = self._clock()
            self.moved_by_wake(at, channel.tick() - at)
        self._wait = self._wait_cpu = 0.0
        self._wait_runq = self._idle = None
        self._batches = 0
        if self._carry is not None:
            # fetched after the closed step's end: the first data wait of this step
            self._add_fetch(*self._carry)
            self._carry = None
        self._bwd = 0.0
        self._bwd_start = None
        if self._provisional is not None:
            return  # held: the listeners hear of these steps once confirmed
        dur = end - start
        if i + 1 >= self._due_at or (dur > self._due_above and not self._slowed_by_wake(start)):
            self._due(i + 1, dur)
        else:
            self._skip(dur)
        for listener in self.listeners:
            listener(i + 1, dur)

    def _slowed_by_wake(self, start: float) -> bool:
        """A wake of the probe's channel ended after this step began (read only for a step over
        op accounting's outlier threshold, ``_due_above``): the step was slow for the probe's
        own work, nothing new ran, and op accounting is not woken to sample for it. A 1 ms
        loop's step with a wake in it took ~4 times the median, right at that threshold
        (``ops_schedule.OUTLIER``): 8 of 11 samples of a 12,000-step run were woken so."""
        wakes = self.wakes
        if wakes is None:
            return False
        spans = wakes.wake_spans
        return bool(spans) and spans[-1][1] >= start  # the last wake ended after the step began

    def moved_by_wake(self, at: float, seconds: float) -> None:
        """A wake of the inline channel outside the boundary (probe/inline_wakes.py) began
        at ``at`` and took ``seconds``: the step in progress does not count them."""
        self._start += seconds
        self._wake_shifts.append((at, seconds))

    def _unshift(self, start: float, end: float) -> float:
        """The start of the step that ends at ``end`` without the wakes that came after its
        end: a step is often closed later than it ended (at the next optimizer step of a
        cycle, ``_last_opt_time``; a pass's ``_last_bwd_time``; a caller that read the
        clock before a collection woke the channel), and a wake in between moved the start
        of a step already over: its start then came after its end, a negative duration (a
        step missing from the trace, op accounting fed a negative time). Those wakes are
        the next step's time: they stay recorded, and ``_close`` moves its start by them."""
        later = [(at, seconds) for at, seconds in self._wake_shifts if at >= end]
        self._wake_shifts = later  # the next step's: its start moves by them (and they stay
        return start - sum(seconds for _, seconds in later)  # recorded, should its end be read before them too)

    def set_due_listener(self, listener: Callable[[int, float, deque[float]], tuple[float, float]] | None) -> None:
        """Install (or remove, None) the due listener; it hears the next boundary."""
        self.due_listener = listener
        self._skipped.clear()
        self._due_at = 0 if listener is not None else math.inf
        self._due_above = math.inf

    def _due(self, next_step: int, dur: float) -> None:
        listener = self.due_listener
        if listener is None:
            self._due_at = math.inf
            return
        due_at, self._due_above = listener(next_step, dur, self._skipped)
        # (never further than the durations kept: a listener asking for later loses none)
        self._due_at = min(due_at, next_step + DUE_SPAN)
        self._skipped.clear()

    def _fold(self) -> None:
        """Move the closed steps' rows into the columns, or past the detail into the
        aggregate (the caller holds the lock; the training thread may append meanwhile).
        Column by column: this thread holds the GIL the training needs, so briefly."""
        batch = take(self._rows)  # (appended.py: a row appended meanwhile stays)
        n = len(batch)
        if not n:
            return
        first, last = batch[0][0], batch[-1][0]
        if last < self._detail_end and last - first == n - 1 and (first - 1) // FAST_BLOCK == last // FAST_BLOCK:
            k = n  # consecutive steps, all detailed, no block's first step among them: no loop a row
        else:
            k = 0
            for row in batch:  # how many stay detailed (the fast-step check moves the end)
                i = row[0]
                if i >= self._detail_end:
                    break
                if not i % FAST_BLOCK:
                    self._check_fast(i, row[2])
                k += 1
        if k:
            self._detailed += batch[:k] if k < n else batch
        if k < n:
            self._agg_rows += batch[k:]

    def no_training_signal(self) -> None:
        """The optimizer and backward hooks are off (a probe fault): no first step can come to
        say the held batches were fetched ahead, so they are steps now and none is held again
        (the op sampler and the live view then see the DataLoader's steps as they happen)."""
        self._may_hold = False
        self._confirm()

    def _confirm(self) -> None:
        """The held DataLoader-counted steps are real steps (a loop without training)."""
        if self._provisional is None:
            return
        self._provisional = None
        with self._lock:
            self._fold()  # nothing is folded while steps are held: every held step is in the detail now
            last = self._detailed[-1] if self._detailed else None
            dur = round(last[2] - last[1], 7) if last is not None else 0.0  # as its "dur" column
        self._due(self.index, dur)
        for listener in self.listeners:
            listener(self.index, dur)

    def crashed(self, in_training: bool) -> None:
        """An uncaught exception ends the run. Held DataLoader-counted steps that were the
        batches of a first step that never finished are retracted, not confirmed at exit as
        steps of a loop without training (a crash in the first step is the crash only, not
        "crashed after 2 steps"): all of them when the exception came out of a framework's
        training entry (``in_training``: Lightning's sanity check, the Trainer's accumulation
        window and look-ahead), else as many as the loader fetches ahead (``LOOK_AHEAD``):
        a plain inference loop that crashed at its 10th batch keeps its steps."""
        held = self.held
        if held and (in_training or held <= LOOK_AHEAD.get(self.first_fetch_by or "", 0)):
            self._retract()
            self._may_hold = False

    def _retract(self) -> None:
        """The first backward pass or optimizer step: the held DataLoader-counted steps
        were batches fetched ahead of the training's first step; fold them into step 0."""
        start = self._provisional
        if start is None:
            return
        self._provisional = None
        with self._lock:
            self._fold()
            cols = columns()
            fold_columns(cols, self._detailed, self._origin)  # (the figures as sent: rounded)
            n = len(cols["i"])
            fetches = [[cols["wait"][j], cols["wait_cpu"][j], cols["wait_runq"][j], cols["batches"][j],
                        cols["idle"][j]] for j in range(n)]
            self._detailed = []
        self.retracted += self.index
        self.index = 0
        self._start = start
        self._block_end = None
        self.mode = "none"
        for fetch in fetches:
            self._add_fetch(*fetch)

    def _training_begins(self) -> None:
        """The first backward pass, optimizer step or ``mpsprofiler.step()`` after more than
        ``PROVISIONAL`` DataLoader-counted steps were confirmed: those were the batches of a
        pass without training before it (the untrained model's validation, a
        ``trainer.validate()`` before ``fit``), not steps of a loop without training (88
        validation batches made 188 steps of 100). Sent already, they cannot be folded into
        step 0 as held ones are (:meth:`_retract`): those not sent yet are dropped, the next
        ``steps`` event says ``restart`` (the session starts its step figures again), and the
        numbering starts again at this step, 0, as after a retraction: the steps and every
        instrument that numbers by them (op samples, loss and leak readings) agree, and the
        analyzers that read a step's index as its position (warm-up) stay right. The batches
        count as fetched ahead (``retracted``)."""
        with self._lock:
            take(self._rows)
            self._detailed = []
            self._agg_rows = []
            self._restart = True
        self.retracted += self.index
        self.index = 0
        self._block_end = None
        self._detail_end = self._detail_limit
        self.mode = "none"

    def _check_fast(self, i: int, end: float) -> None:
        """At each block's first step: were the last ``FAST_BLOCK`` steps fast? (One
        modulo per step; the detail ends after this step.)"""
        start = self._block_end
        self._block_end = end
        if i >= FAST_AFTER and start is not None and end - start < FAST_BLOCK * FAST_STEP:
            self._detail_end = i + 1

    def _mark_queued_work(self) -> None:
        """At a fetch's start, record a stream event behind all the work queued so far.

        If the device has passed it when the fetch ends, the device ran out of work while
        the host waited for data (idle); if not, the wait was hidden behind queued work.
        Recording at the fetch, not at the step's end, counts work queued between the
        optimizer step and the next fetch (logging, EMA updates, extra kernels) too.
        """
        try:
            if self._event is None:
                self._event = self.backend.new_event()  # None until the script uses the device
            if self._event is not None:
                self._event.record()
                self._event_pending = True
        except Exception:
            self._event = None
            self._event_pending = False

    def _read_idle(self) -> int | None:
        """At a fetch's end: did the device drain its queue during the wait? (Any fetch of a
        step that found it idle makes the step's wait an idle one.)"""
        self._event_pending = False
        try:
            return 1 if self._event.query() else 0
        except Exception:
            return None

    # -- hooks ------------------------------------------------------------------
    def on_optimizer_step(self, optimizer: Any) -> None:
        mode = self.mode
        if mode == "optimizer" and self._single is not None and not self._seen and self._carry is None:
            try:  # _optimizer_key, inlined: this runs at every step
                key = id(optimizer.param_groups[0]["params"][0])
            except Exception:
                key = id(optimizer)
            if key == self._single:
                # the usual step of a one-optimizer loop: what the general path below does then
                # (the key joins the empty set, which then holds the whole cycle) in one test.
                # (``in_optimizer`` is left as it is: in this mode no pass reads it, and the
                # pre-hook that sets it is gone, step_hooks.py)
                now = self._last_opt_time = self._clock()
                self._close(now)
                return
        self.in_optimizer = False
        if mode == "manual":
            return
        now = self._clock()
        if self._provisional is not None:
            self._retract()
        elif mode == "dataloader":
            self._training_begins()
        self.mode = "optimizer"
        key = _optimizer_key(optimizer)
        seen = self._seen
        if key in seen:
            # a repeat: the previous iteration ended at the last optimizer step before it.
            # An iteration of none of the learnt optimizers relearns them: a new model and
            # optimizer per fold (k-fold), trial or restart updates new parameters, and the
            # old set, never complete again, left every later step closed one step late
            # (a fold's first step merged into the previous fold's last)
            if self._cycle is None or not seen & self._cycle:
                self._cycle = frozenset(seen)
                self._single = key if len(seen) == 1 else None
            self._close(self._last_opt_time)
            seen.clear()
        elif self.index == 0 and self._cycle is None and not seen:
            for listener in self.first_optimizer_listeners:
                listener(now - self._start, self.closure_step)
        if self._carry is not None and key not in seen:
            self._keep_carry()
        seen.add(key)
        self._last_opt_time = now
        cycle = self._cycle
        if cycle is not None and seen >= cycle:
            self._close(now)
            seen.clear()

    def _add_backward(self, start: float | None, end: float) -> None:
        if start is None:
            return
        self._bwd += end - start
        if self._bwd_start is None:
            self._bwd_start = start

    def on_backward(self, site: Any, end: float, reset: bool = True, start: float | None = None) -> None:
        """A backward pass from call site ``site`` ended at ``end`` (see module docstring).

        ``reset`` False: the site ran before and its gradients were not zeroed since, so
        this pass accumulates into the same update (gradient accumulation), and passes
        inside an optimizer step (LBFGS's closure) are the optimizer's: neither is a step.
        """
        self.backwards += 1
        if self._provisional is not None:
            self._retract()
        mode = self.mode
        if mode == "optimizer" or mode == "manual" or self.in_optimizer:
            if start is not None:  # _add_backward, inlined: this runs at every step
                self._bwd += end - start
                if self._bwd_start is None:
                    self._bwd_start = start
            return
        if mode == "dataloader":
            self._training_begins()
        if not reset and (site in self._bwd_seen or (self._bwd_cycle is not None and site in self._bwd_cycle)):
            self._add_backward(start, end)
            self._last_bwd_time = end  # a micro-batch: the step goes on
            self._keep_carry()
            return
        if site in self._bwd_seen:
            # the second iteration has begun: no optimizer stepped in the first one
            self.mode = "backward"
            if self._bwd_cycle is None:
                self._bwd_cycle = frozenset(self._bwd_seen)
            if self._last_bwd_time > self._start:
                self._close(self._last_bwd_time)
            self._bwd_seen = {site}
        else:
            self._keep_carry()
            self._bwd_seen.add(site)
        self._add_backward(start, end)
        self._last_bwd_time = end
        if self._bwd_cycle is not None and self._bwd_seen >= self._bwd_cycle:
            self._close(end)
            self._bwd_seen = set()

    def _mark_start(self) -> None:
        if self.index == 0 and self._fetches == 0 and not self._seen and not self._started:
            self._start = self._clock()
        self._started = True

    def on_fetch_start(self) -> tuple[float, tuple[float, float | None, bool] | None]:
        """A DataLoader fetch begins: returns what :meth:`on_fetch_end` needs. The fetch
        clock's schedule and estimate (``cputime.FetchClock``) are these two methods', so that
        a batch whose clocks are not read makes no call for them. The DataLoader wrapper
        (``fetch_path.py``) does the steady batch's share of both in its own frame, with the
        same operations (issue 34): a change here is a change there."""
        now = self._clock()
        if not self._started:
            self._mark_start()
        if self.mode in _FETCH_COUNTED and not self.backwards and self._fetches > 0 and self._batches:
            # (a step that took no batch yet is the gap after a pass's end, StopIteration:
            # the next pass's first batch is still its batch, as an optimizer-counted step
            # holds the epoch's boundary; closed here it was a step of its own, 39 extra
            # ~0.2 ms "steps" in an evaluation of 40 passes over 4 batches)
            self.mode = "dataloader"
            if self.index == 0 and self._provisional is None and not self.retracted and self._may_hold:
                self._provisional = self._start
            self._close(now)
            if self._provisional is not None and self.index >= min(PROVISIONAL, self._detail_end):
                self._confirm()
            # the step-boundary listeners (the op sampler switching on) ran just now:
            # their time is the profiler's, not a wait for data
            now = self._clock()
        n = self._fetches = self._fetches + 1
        FETCH.thread = _get_ident()
        # the fetch clock's schedule (cputime.FetchClock's docstring): the first fetches, those
        # whose count is due (READ_GAPS apart) and every one after a long wait are read
        # (``_read_at``); the others not at all
        if self.backend.asynchronous:
            self._mark_queued_work()
            if n >= self._read_at:
                # the CPU clock's wall time is read right before it (the run-queue skip compares them)
                return now, self._read_start(n, self._clock())
        elif n >= self._read_at:
            return now, self._read_start(n, now)
        return now, None

    def _read_start(self, n: int, now: float) -> tuple[float, float | None, bool]:
        """The ``n``-th fetch is read (its clocks at the start): the next one due is the next
        of the first ``EXACT_FETCHES``, then the next count of the fixed schedule
        ``READ_GAPS`` draws, whichever fetches were read in between (a long wait makes the
        next fetch one, :meth:`on_fetch_end`): the counts read for the estimate depend on
        nothing a fetch did."""
        if n < EXACT_FETCHES:
            self._read_at = n + 1
        else:
            due = self._due_read
            if due <= n:
                gap = self._gap
                while due <= n:
                    due += READ_GAPS[gap]
                    gap = gap + 1 if gap + 1 < len(READ_GAPS) else 0
                self._gap = gap
                self._due_read = due
            self._read_at = due
        return self._fetch_clock.read_start(now)

    def on_fetch_end(self, started: tuple[float, tuple[float, float | None, bool] | None], got_batch: bool) -> float:
        """The fetch begun at ``started`` has ended; returns the clock then (the DataLoader hook's
        batch arrival: one clock read for both)."""
        FETCH.thread = None
        t0, reading = started
        now = self._clock()
        wait = now - t0
        if reading is None:
            # not read: the wall time times the ratios of the fetches read that were as long
            # as this one (cputime.FetchClock.ratios). A fetch not read follows one shorter
            # than READ_AFTER, so the clock's ``after_wait`` is False already: only a wait
            # that long changes it
            clock = self._fetch_clock
            if wait < LONG_FETCH:
                ratio = clock.ratios[0]
            else:
                if wait >= READ_AFTER:
                    clock.after_wait = True
                    self._read_at = 0
                ratio = clock.ratios[1]
            if ratio is None:
                cpu, runq = wait, None
            else:
                total, cpu_s, runq_s = ratio
                cpu = wait * cpu_s / total
                if cpu >= wait:
                    cpu = wait
                runq = None if runq_s is None else wait * runq_s / total
        else:
            clock = self._fetch_clock
            cpu, runq = clock.read_end(reading, now, wait)
            if clock.after_wait:
                self._read_at = 0
        idle = self._read_idle() if self._event_pending else None
        mode = self.mode
        if self._seen if mode == "optimizer" else mode in _BACKWARD_COUNTED and self._bwd_seen:
            # after an optimizer step (or backward pass) of an iteration not yet closed:
            # most likely the next step's batch, held until the next one says which
            fetch: list[Any] = [wait, cpu, runq, 1 if got_batch else 0, idle]
            if self._carry is None:
                self._carry = fetch
            else:
                self._carry = merge_fetch(self._carry, fetch)
        else:  # _add_fetch, inlined: this runs at every batch
            self._wait += wait
            self._wait_cpu += cpu
            self._batches += got_batch
            if runq is not None:
                wait_runq = self._wait_runq
                self._wait_runq = runq if wait_runq is None else wait_runq + runq
            if idle is not None:
                self._idle = idle if self._idle is None else max(self._idle, idle)
        if self.fetch_listeners:
            for listener in self.fetch_listeners:
                listener()
        return now

    def _keep_carry(self) -> None:
        """The held fetch belonged to the step in progress after all (another optimizer
        or backward line of the same iteration, or a micro-batch)."""
        if self._carry is not None:
            self._add_fetch(*self._carry)
            self._carry = None

    def _add_fetch(self, wait: float, cpu: float, runq: float | None, batches: int, idle: int | None) -> None:
        self._wait += wait
        self._wait_cpu += cpu
        if runq is not None:
            self._wait_runq = (self._wait_runq or 0.0) + runq
        self._batches += batches
        if idle is not None:
            self._idle = idle if self._idle is None else max(self._idle, idle)

    @property
    def held(self) -> int:
        """DataLoader-counted steps held now (see ``PROVISIONAL``)."""
        return self.index if self._provisional is not None else 0

    def manual_step(self) -> None:
        self._retract()
        if self.mode == "dataloader":
            self._training_begins()
        self._started = True
        self.mode = "manual"
        self._close(self._clock())

    def finish(self) -> None:
        """At exit: close the step in progress if it did any work, then drain."""
        self._confirm()
        cycle = self._cycle
        if self.mode == "optimizer" and self._seen and (cycle is None or self._seen & cycle):
            # (a partial iteration of optimizers outside the learnt cycle only, a GAN's
            # generator stepping every 2nd batch after the last discriminator step, is the
            # end of the last step, not a step of its own: 385 steps of 384 batches)
            self._close(self._last_opt_time)
            self._seen = set()
        elif self.mode in ("none", "dataloader", "backward") and self._bwd_seen:
            # a run of one iteration, or a partial last one: its backward passes end it
            if self._last_bwd_time > self._start:
                self.mode = "backward"
                self._close(self._last_bwd_time)
            self._bwd_seen = set()

    # -- draining (channel thread) ---------------------------------------------
    @property
    def aggregated_pending(self) -> int:
        """Steps past the detail folded and not sent yet (the probe sends them early once
        there are ``AGG_ROWS_MAX``: the packed line and the rows held stay bounded)."""
        return len(self._agg_rows)

    def drain(self, send: bool = True) -> None:
        """Send pending steps as one ``steps`` event (called from the channel thread);
        ``send`` False: only fold them (between two sends of aggregates, see the probe)."""
        if self._provisional is not None:
            return  # held until a backward pass, an optimizer step, PROVISIONAL batches or exit
        with self._lock:
            self._fold()
            if not send:
                return
            rows = self._detailed
            agg_rows = self._agg_rows
            if not rows and not agg_rows:
                return
            # swap in fresh containers; the training thread appends to the new ones
            self._detailed = []
            self._agg_rows = []
            restart, self._restart = self._restart, False  # (with the steps it goes before)
        cycle = self._cycle if self.mode == "optimizer" else None
        wakes = self.wakes
        slowed = _in_spans(agg_rows, list(wakes.wake_spans)) if agg_rows and wakes is not None else []
        payload = steps_payload(rows, self._origin, agg_rows, self.mode, len(cycle) if cycle else None, slowed)
        if restart:
            payload["restart"] = True
        self._emit(events.KIND_STEPS, **payload)


def _in_spans(rows: list[tuple[Any, ...]], spans: list[tuple[float, float]]) -> list[int]:
    """Indices of the rows (closed steps in order, :data:`~.step_aggregate.ROW`) whose time
    overlaps one of ``spans`` (the channel's wakes): a bisection a wake, no loop a row."""
    found: set[int] = set()
    n = len(rows)
    for started, ended in spans:
        k = bisect.bisect_right(rows, started, key=_END)  # the first step that ended after the wake began
        while k < n and rows[k][1] < ended:  # ... and began before it ended
            found.add(k)
            k += 1
    return sorted(found)


_END = operator.itemgetter(2)


def _optimizer_key(optimizer: Any) -> int:
    """Which optimizer this is, by the first parameter it updates (see the module docstring).

    Two optimizers of a GAN update different parameters; a new optimizer built every
    iteration over the same model is the same one. Without parameters: the object's id.
    """
    try:
        return id(optimizer.param_groups[0]["params"][0])
    except Exception:
        return id(optimizer)
