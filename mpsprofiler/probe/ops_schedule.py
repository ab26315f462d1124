"""When op accounting samples a step: a budget over all steps, and a census that converges.

A sampled step costs tens of microseconds per op (the dispatch mode, module hooks, stack
walks), so op accounting samples few steps. Two rules pick them:

* **Budget.** The time sampling added (the sampled steps' excess over the median plain
  step, the step after each sample, which pays for building the event and, on an
  accelerator, for the queue the slow host step let run dry, and the leak checks) is held
  within ``budget`` of the wall time of *all* steps so far, sampled or not. The forced
  early samples are paid back before sampling resumes. Only the first is forced on every
  run: the later ones are forced while the first was cheap (``EARLY_FREE_OPS``,
  ``EARLY_FREE_S``) or left a tensor alive (a leak candidate), and otherwise wait for the
  budget like any other sample.
* **Convergence.** Each sample's census (its ops, modules, call sites, call counts, first
  shapes, syncs and float64 sites) is compared with the censuses seen before. Once
  ``STABLE_SAMPLES`` samples in a row brought nothing new, the loop is known: sampling
  spends at most ``CONVERGED_SHARE`` of the budget and every further sample at least
  doubles the interval, so op accounting nearly stops paying. A census never seen before
  (new module, new shapes, evaluation ops, a recompiled graph) ends convergence, and
  sampling is back at the full budget.

What is new can only be seen on a sampled step, so between samples two cheap signals
(one float comparison per step, a median of 64 floats every 64 steps) wake sampling
early: a step far longer than the median (a recompile, an evaluation pass, a checkpoint)
and a shift of the median step time (a new module, new shapes). A sample they bring
that finds a known census changes nothing; woken samples are held to the full budget,
so a noisy machine cannot make them cost more than that.

:meth:`SampleSchedule.due` is the one sampled-step decision: other instruments that work
on sampled steps only (device-busy timing) ask it, or the accountant's ``sampling``.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Collection, Hashable, Iterable
from functools import reduce
from operator import add

from .sample_phase import next_sampled_step

DEFAULT_BUDGET = 0.003
"""Op accounting's default budget (``--ops-budget``), a share of the training time.

The product's goal is at most 0.5% added time at steps of 5 ms or more for the whole probe,
and op accounting is one part of it: the per-step tracking adds ~20-30 µs a step on a CPU
(0.1-0.2% of a 16 ms Hugging Face Trainer step, more at 5 ms; hidden behind a GPU's queue
on a GPU-bound loop) and the channel's wakes ~0.05%. At 0.5% (the budget before) op
accounting alone filled the goal until it converged: nanoGPT's 2,000-step run on an H100
paid 2 samples, 69-76 ms, 0.38-0.40% of its 17.5 s (benchmarks/RESULTS.md, session 59).
At 0.3% the second sample of a run like that waits for ~23 s of training. The forced first
sample and the cheap early ones (``EARLY_FREE_OPS``, ``EARLY_FREE_S``) do not wait for the
budget, so what a short script learns from its first steps is the same."""
STABLE_SAMPLES = 3
"""Samples with a census seen before, in a row, after which the loop counts as known."""
CONVERGED_SHARE = 0.1
"""Share of the budget sampling may spend once converged."""
BACKOFF = 2
"""Once converged, each sample at least multiplies the interval by this."""
MAX_INTERVAL = 5_000
MAX_CONVERGED_INTERVAL = 1_000_000
OUTLIER = 4.0
"""A step this many times the median plain step (and ``OUTLIER_MIN_S`` longer) wakes sampling."""
OUTLIER_MIN_S = 0.002
DRIFT_EVERY = 64
DRIFT = 0.25
"""A median step time this far (relative) from the one at convergence wakes sampling."""
FOLLOW_PERIOD = 20
"""Steps apart a leak candidate's step and the sample that follows it up are a multiple of
(:meth:`SampleSchedule.follow_phase`): every period of 1, 2, 4, 5, 10 or 20 steps (what a
script keeps a tensor every Nth step for, gradient accumulation's 4 included) repeats the
candidate's step there, for at most 19 steps of delay, once per candidate."""
MAX_CENSUSES = 32
EARLY_FREE_OPS = 1_000
EARLY_FREE_S = 0.025
"""The forced early samples after the first are taken as planned when the first sampled
step ran at most ``EARLY_FREE_OPS`` ops and cost at most ``EARLY_FREE_S``: its excess over
a plain step and its event, or, on a CPU run where the training thread's CPU time says
less, that (on a busy machine a step's wall time grows with the wait for a CPU, its CPU
time much less, so the decision does not turn on the machine's load). Such a second
sample costs a few ms (every test script's costs 1-14 ms on a 2-core machine), and it is
what lets a short script name the line of a leak (a line whose tensors survive from two
sampled steps). A larger step would pay it twice within the run's first seconds
(nanoGPT's 40-60 ms a sample on an H200 host, where 25 ms is 0.5% of 5 s of training; a
tiny Hugging Face Trainer's ~500 ops cost 27 ms on a 2-core machine): there the second
sample waits for the budget, unless the leak check before it finds a tensor of the first
still alive (``SampleSchedule.early_step_due``).

Where the framework says how many steps the run will make (``SampleSchedule.plan``: a
Trainer's ``max_steps``), the later early samples are also left to the budget when, with
one more like the first, op accounting would spend over its budget of the whole planned
run: a 200-step Trainer run of 22 ms steps has 13 ms of budget at the default
(``DEFAULT_BUDGET``), less than one 16-20 ms sample."""


def _early_cost(overhead: float, cpu_s: float | None, median: float) -> float:
    """A sample's cost for the early decision: its wall-time excess, or less where the
    training thread's CPU time over the sampled step and its finish (building the event)
    says less (the rest was a wait for a CPU). The finish counts in CPU time too: on a busy
    machine its wall time took 5-7 ms where its CPU time took 0.2 ms, and a preemption
    there had tipped the decision."""
    if cpu_s is None or median <= 0:
        return overhead
    return min(overhead, max(0.0, cpu_s - median))


class SampleSchedule:
    """Picks sampled steps; fed every step's duration by the op accountant.

    ``wake_above`` and ``record_from`` are read on the accountant's per-step fast path;
    the rest runs when a sample ends, at a wake, or every ``DRIFT_EVERY`` plain steps."""

    def __init__(self, budget: float, early_steps: Iterable[int], min_interval: int = 4,
                 every_step: bool = False) -> None:  # fmt: skip
        self.budget = max(float(budget), 1e-4)
        self.early = sorted({int(s) for s in early_steps if int(s) >= 0})
        self.min_interval = max(1, int(min_interval))
        self.every_step = every_step
        self.next_sample: float = self.early[0] if self.early else 3
        self.record_from = 2
        """Plain steps from here on feed the median (the step after a sample pays for it)."""
        self.plain: deque[float] = deque(maxlen=64)
        self.total = 0.0
        """Seconds of all steps so far."""
        self.added = 0.0
        """Estimated seconds sampling added so far (``cost_s`` in the events)."""
        self.ratios: deque[float] = deque(maxlen=5)
        self.samples = 0
        self.interval = self.min_interval
        self.median = 0.0
        self.censuses: dict[Hashable, int] = {}
        self.stable = 0
        self.converged = False
        self.wakes = 0
        self.wake_above = math.inf
        self._drift_count = 0
        self._drift_ref = 0.0
        self._post_step = -1
        self._post_paid = 0.0
        self.early_if_kept: list[int] = []
        """Forced early steps left out because the first sample was expensive; the accountant
        calls :meth:`early_step_due` when each comes, after its leak check."""
        self.planned: int | None = None
        """Steps the whole run will make, where the framework says so (see :meth:`plan`)."""

    def step_time(self) -> float:
        """A plain step's time: the median at the last sample, else of the plain steps so
        far (the first sample's: step 2 alone), else 0 (none known)."""
        if self.median > 0:
            return self.median
        return statistics.median(self.plain) if self.plain else 0.0

    # -- the decision -------------------------------------------------------------
    def due(self, next_step: int) -> bool:
        """Whether the step that begins at this boundary is to be sampled."""
        return next_step >= self.next_sample

    def plan(self, steps: int | None) -> None:
        """The run's length in steps, as its framework announced it at the first optimizer
        step (``probe/frameworks.planned_steps``), or None where nothing said."""
        self.planned = steps if steps is not None and steps > 0 else None

    def _over_planned(self, overhead: float, median: float) -> bool:
        """One more sample like the one just taken would put op accounting over its budget
        of the whole planned run."""
        return self.planned is not None and median > 0 and \
            self.added + overhead > self.budget * self.planned * median

    # -- every step (the accountant's fast path calls these rarely) -------------------
    def plain_step(self, next_step: int, last: float) -> None:
        """A step that was not sampled ended (``last`` seconds). At every plain step: the
        usual case (past ``record_from``, which is never before ``_post_step``) tests once."""
        if next_step <= self.record_from:
            if next_step == self._post_step:
                self._post_step = -1
                if self.median > 0:  # what the step after the sample spent beyond the usual
                    self._charge(max(0.0, last - self.median - self._post_paid))
            return
        self.plain.append(last)
        self._drift_count += 1
        if self._drift_count >= DRIFT_EVERY:
            self._drift_count = 0
            self._check_drift(next_step)

    def plain_steps(self, durations: Collection[float]) -> None:
        """Plain steps the accountant was not called for (``plain_due`` said none needed it):
        what :meth:`plain_step` and the accountant's total do at each, in order, at once."""
        # one addition after another, as at each step (``sum`` of floats compensates its
        # rounding from Python 3.12 on: not the same total)
        self.total = reduce(add, durations, self.total)
        self.plain.extend(durations)
        self._drift_count += len(durations)

    def plain_due(self, next_step: int) -> int:
        """The next step whose plain-step bookkeeping needs :meth:`plain_step` itself: the
        steps up to ``record_from`` (the charge of the step after a sample) and the drift
        check's every ``DRIFT_EVERY``-th; the steps before it can go to :meth:`plain_steps`."""
        if next_step < self.record_from:
            return next_step + 1
        return next_step + DRIFT_EVERY - self._drift_count

    def early_step_due(self, next_step: int, kept: bool) -> None:
        """An early step left out (see ``EARLY_FREE_S``) has come: sample it all the same when
        ``kept``, a tensor of the first sampled step still alive at the leak check of this
        boundary. A second sampled step is what names a leak's line (the tensors of one line
        surviving from two sampled steps), so a short run of expensive steps keeps its
        ``history.append(loss)`` line; a clean one does not pay for the sample."""
        self.early_if_kept = [s for s in self.early_if_kept if s > next_step]
        if kept and next_step < self.next_sample:
            self.next_sample = next_step

    def follow_phase(self, next_step: int, step: int) -> None:
        """A tensor of sampled step ``step`` survived a check, on that sampled step only (a
        leak candidate): move the next sample to the first step at or after the planned one
        in the same phase, ``step`` mod ``FOLLOW_PERIOD``. A script that keeps a tensor every
        Nth step (N of 2s and 5s: ``if step % 5 == 0``) keeps one there again, and that
        second sampled step is what names the line (:mod:`.ops_leaks`); the phase walk of
        :func:`next_sampled_step` would reach the same residue only after up to five more
        samples, which a short run's budget may not buy. The sample only comes later, so it
        costs no more than the budget allows; a one-time buffer's survivor moves one sample."""
        at = self.next_sample
        if not math.isfinite(at) or at <= next_step:
            return
        self.next_sample = int(at) + (step - int(at)) % FOLLOW_PERIOD

    def outlier(self, next_step: int, last: float) -> None:
        """A step longer than ``wake_above`` ended: something new may have run."""
        if next_step != self._post_step and next_step > self.record_from:
            self.wake(next_step)

    def wake(self, next_step: int) -> None:
        """Sample soon: at the first step the full budget allows from ``next_step`` on."""
        self.wakes += 1
        earliest = next_step + self._steps_needed(self.budget)
        if earliest < self.next_sample:
            self.next_sample = earliest

    def _check_drift(self, next_step: int) -> None:
        if not self.converged or self._drift_ref <= 0:
            return
        recent = statistics.median(list(self.plain)[-DRIFT_EVERY:])
        if abs(recent - self._drift_ref) > DRIFT * self._drift_ref:
            self._drift_ref = recent  # one wake per shift
            self.wake(next_step)

    def extra(self, seconds: float) -> None:
        """Time spent for op accounting outside a sampled step (leak checks)."""
        self._charge(max(0.0, seconds))

    def _charge(self, seconds: float) -> None:
        """Count ``seconds`` against the budget, and against the last sample's ratio: the
        cost of the next sample is predicted from whole samples (the step after, the leak
        checks), not from their sampled steps alone."""
        self.added += seconds
        if self.ratios and self.median > 0:
            self.ratios[-1] += seconds / self.median

    # -- when a sample ends -------------------------------------------------------
    def sampled(self, step: int, host_s: float, finish_cost: float, census: Hashable | None,
                measurable: bool = True, ops: int = 0, cpu_s: float | None = None) -> float:  # fmt: skip
        """Schedule the next sample after ``step``; returns this sample's overhead estimate.

        ``census``: what the sample saw (None: not comparable, e.g. a partial sample);
        ``measurable``: False for a truncated sample (its host time is not a step's);
        ``ops``: the ops it recorded; ``cpu_s``: the CPU seconds the training thread spent
        in it and its finish, on a CPU run (both decide whether the forced early samples go on, see
        ``EARLY_FREE_S``)."""
        self.samples += 1
        self.record_from = step + 2
        self._post_step = step + 2
        self._post_paid = finish_cost  # counted here already; the next step's excess adds the rest
        median = self.median = statistics.median(self.plain) if self.plain else 0.0
        self.wake_above = max(OUTLIER * median, median + OUTLIER_MIN_S) if median > 0 else math.inf
        if median > 0 and measurable:
            overhead = max(0.0, host_s - median) + finish_cost
            self.ratios.append(overhead / median)
        else:
            overhead = finish_cost
        self.added += overhead
        self._census(census, median)
        later = [s for s in self.early if s > step]
        early_cost = _early_cost(overhead, cpu_s, median)
        if later and (ops > EARLY_FREE_OPS or early_cost > EARLY_FREE_S or self._over_planned(early_cost, median)):
            self.early = [s for s in self.early if s <= step]  # the rest wait for the budget ...
            self.early_if_kept = later  # ... unless a tensor of this step is still alive then
            later = []
        if later:
            self.next_sample = later[0]
        elif self.every_step:
            self.next_sample = step + 1
        else:  # the interval, spread over the phases of periodic work (see sample_phase)
            self.next_sample = next_sampled_step(step, self.interval, self.samples)
        return overhead

    def _census(self, census: Hashable | None, median: float) -> None:
        """Update convergence and the interval from this sample's census."""
        known = census is not None and census in self.censuses
        if census is not None:
            if known:
                self.censuses[census] += 1
            elif len(self.censuses) < MAX_CENSUSES:
                self.censuses[census] = 1
        was = self.converged
        self.stable = self.stable + 1 if known else 0
        self.converged = known and (was or self.stable >= STABLE_SAMPLES - 1)
        if self.converged and not was:
            self._drift_ref = median
            self._drift_count = 0
        need = self._steps_needed(self.budget * (CONVERGED_SHARE if self.converged else 1.0))
        if self.converged:
            grown = self.interval * BACKOFF if was else self.interval
            self.interval = min(MAX_CONVERGED_INTERVAL, max(self.min_interval, need, grown, self.samples))
        else:
            self.interval = min(MAX_INTERVAL, max(self.min_interval, need, self.samples))

    def _steps_needed(self, budget: float) -> int:
        """Steps to wait before one more sample keeps ``added`` within ``budget`` of all steps."""
        median = self.median
        if not self.ratios or median <= 0:
            return self.min_interval
        ratios = sorted(self.ratios)
        ratio = ratios[(len(ratios) - 1) // 2]  # lower median: the first sample pays one-time costs
        need_time = (self.added + ratio * median) / budget - self.total
        return math.ceil(need_time / median) if need_time > 0 else 0

    def cost(self) -> dict[str, float | int | bool]:
        """What op accounting cost so far, for the events (``cost_s`` over ``steps_s``)."""
        cost: dict[str, float | int | bool] = {"cost_s": round(self.added, 6), "steps_s": round(self.total, 6),
                                               "converged": self.converged, "wakes": self.wakes}  # fmt: skip
        if self.planned is not None:
            cost["planned"] = self.planned
        return cost
