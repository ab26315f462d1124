"""Which steps' backward passes the probe instruments, once the loop is steady.

The backward wrapper (:mod:`.backward`) does four things a pass: the loss check
(:mod:`.health`), the pass's time for the step's phases, the op sampler's safe point
(:mod:`.safe_point`) and, while the step tracker learns where steps end, the call site.
Once optimizer steps (or ``mpsprofiler.step()`` calls) count the steps, the call site is
never needed again (``StepTracker.on_backward``: its mode never goes back), and the other
three need not run at every step: a loss that goes non-finite stays non-finite (every
later update is NaN), a pass's time is a figure of the steady loop read from a few steps,
and the safe point matters only on the op sampler's steps. So, once steady:

* the wrapper is swapped in for one step in ``EVERY`` (at a phase that walks through the
  residues of a script's periodic work: ``EVERY`` shares no factor with 10, see
  :mod:`.sample_phase`), and for every step where something needs it: a change the op
  sampler left pending (a sample begins at this step, or one cut short must remove its
  dispatch mode before the engine runs an op), or a sampled step of the loss check's own
  schedule without op accounting (``extra_next``, :func:`.health.next_fallback_sampled`);
* on every other step torch's own ``_engine_run_backward`` runs: no frame of ours in the
  pass (two attribute writes swap it out, two swap it back, :class:`.backward.Engine`).

The swap is made by the optimizer post-hook, which runs at every step anyway
(``step_hooks.install_optimizer_hooks``), after the step tracker has taken the step: the
next step's passes, all of them (gradient accumulation, two losses, an LBFGS closure),
are then all instrumented or none is. Steps are counted there, so the count stays exact.
Loops whose steps are counted from the backward passes (no optimizer, a compiled
optimizer step whose hooks Dynamo traced as no-ops) keep the wrapper at every pass.

"Steady": the tracker counts optimizer (or manual) steps, ``WARM_STEPS`` steps have
passed, and the loss check has read a finite loss (or cannot read this loop's losses,
``2 * WARM_STEPS``), so a loss that is non-finite from the start is named at its step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .safe_point import SafePoint
from .steps import StepTracker

WARM_STEPS = 64
"""Steps whose backward passes are all instrumented (the session's warm-up detection and
steady medians read the first 512 steps; 64 of them with every phase measured, then one
in ``EVERY``, leave ~125 measured steps in that window)."""
EVERY = 7
"""Once steady, one step in this many has its backward passes instrumented."""


class BackwardSampling:
    """Decides, at each step's optimizer post-hook, whether the next step's backward
    passes run through the probe's wrapper; see the module docstring."""

    __slots__ = ("_tracker", "safe", "_health", "engine", "extra_next", "_decided", "_due", "_next", "_extra_at",
                 "_swapping", "steady_from", "off", "call_at", "bare_next")

    def __init__(self, tracker: StepTracker, safe_point: SafePoint | None, health: Any = None) -> None:
        self._tracker = tracker
        self.safe = safe_point if safe_point is not None else SafePoint()
        """The op sampler's pending change: a step with one pending is wrapped (the optimizer
        hook reads ``pending`` itself, see ``call_at``)."""
        self._health = health
        """The loss watch (probe/health.py), or None: steady only once it has read a finite loss."""
        self.engine: Any = None
        """The engine switch (``backward.install``'s :class:`.backward.Engine`), once installed."""
        self.extra_next: Callable[[int], int] | None = None
        """The next step at or after a given one that needs the wrapper besides these (the
        loss check's own sampled steps without op accounting,
        :func:`.health.next_fallback_sampled`); None where the op sampler's safe point says it all."""
        self._decided = -1
        self._next = WARM_STEPS
        """The next step instrumented for its own sake."""
        self._extra_at = 1 << 62
        self._due = WARM_STEPS
        """``min(_next, _extra_at)``: the one comparison of most steps."""
        self._swapping = False
        """Steady, and the wrapper is in: the next plain step swaps it out."""
        self.steady_from: int | None = None
        """The first step whose backward passes may run bare (None: every step instrumented)."""
        self.off = False
        """Sampling stopped (an instrument failed): the wrapper stays, as before this module."""
        self.call_at = WARM_STEPS
        """The first step index at which :meth:`on_step` has anything to do (the next step due,
        or the step after a wrapped one, which swaps the wrapper out); before it, and while
        ``safe.pending`` is None, the optimizer hook does not call it (issue 34: one comparison
        on most steps instead of a call)."""
        self.bare_next = False
        """The wrapper is out for the step in progress: its passes are not instrumented (the
        loss watch, which needs the stepping optimizer only where it reads a loss, is told
        of the optimizer on the other steps only, ``step_hooks``)."""

    def on_step(self) -> None:
        """After the tracker took an optimizer step (or a ``mpsprofiler.step()``): swap the
        wrapper in or out for the step now in progress. Four tests on most steps."""
        i = self._tracker.index
        if i == self._decided:
            return  # (another optimizer of the same iteration)
        self._decided = i
        if i >= self._due or self.safe.pending is not None:
            self._sample(i)
        elif self._swapping:
            self._swapping = False
            self.engine.bare()
            self.bare_next = True
        self.call_at = i + 1 if self._swapping else self._due

    def _sample(self, i: int) -> None:
        """Step ``i`` runs wrapped: due for its own sake, needed, or not steady yet."""
        if i >= self._due:
            if self.steady_from is None and not self._steady(i):
                self._due = i + 1  # ask again at the next step (the wrapper stays in)
                return
            if i >= self._next:
                self._next = i + EVERY
            if i >= self._extra_at and self.extra_next is not None:
                self._extra_at = self.extra_next(i + 1)
            self._due = min(self._next, self._extra_at)
        engine = self.engine
        if engine is None or self.steady_from is None:
            return
        if not engine.wrapped:
            engine.wrap()
        self._swapping = True
        self.bare_next = False

    def _steady(self, i: int) -> bool:
        """Whether the loop is steady at step ``i`` (see the module docstring); the first
        time it is, the loss check is told from which step its checks are sampled."""
        mode = self._tracker.mode
        if self.off or self.engine is None or (mode != "optimizer" and mode != "manual"):
            return False
        health = self._health
        if health is not None and not health.done and health.last_finite is None and i < 2 * WARM_STEPS:
            return False
        self.steady_from = i + 1
        if self.extra_next is not None:
            self._extra_at = self.extra_next(i + 1)
        if health is not None:
            health.sampled_from = i + 1
        return True

    def stop(self) -> None:
        """Instrument every pass again, for good (the swap or the decision failed)."""
        self.off = True
        self.steady_from = None
        self._swapping = self.bare_next = False
        self._due = self._next = self.call_at = 1 << 62
        engine = self.engine
        if engine is not None:
            engine.wrap()


def stop_sampling(sampling: BackwardSampling | None) -> None:
    """Every backward pass instrumented again (a hook that decides the swaps failed or is off)."""
    if sampling is None:
        return
    try:
        sampling.stop()
    except Exception:
        pass
