"""Op accounting hears the step boundaries it asks for only (issue 34): the step tracker
holds the plain steps' durations between two calls (``StepTracker.set_due_listener``,
``OpAccountant.due``) and the schedule takes them at once (``SampleSchedule.plain_steps``).
The decisions must be those of a call at every step: the same sampled steps, wakes, budget
and median window, float for float. Two real accountants are fed the same step durations
(a steady loop with outliers and a shift of the step time, so the outlier test and the
drift check wake sampling), one at every boundary as before, one through a real tracker
on a scripted clock; what a sample records is replaced by a fixed report (its census and
cost), so nothing depends on this machine's speed."""

from __future__ import annotations

import random
from typing import Any

import pytest

from mpsprofiler.devices.cpu import CpuBackend
from mpsprofiler.probe.ops import OpAccountant
from mpsprofiler.probe.steps import StepTracker


def _accountant(sampled: list[int]) -> OpAccountant:
    """A real accountant whose samples record nothing: a sample begins and ends at the
    boundaries as before, and reports a fixed cost and census to the real schedule."""
    acct = OpAccountant(lambda *a, **k: None, budget=0.01, min_interval=4)
    sched = acct.schedule

    def begin(step: int, last: float | None = None) -> None:
        acct._active_step = step
        sampled.append(step)

    def finish(last: float | None, partial: bool = False) -> None:
        step = acct._active_step
        acct._active_step = None
        assert step is not None and last is not None
        sched.sampled(step, last, 2e-4, "census" if step < 2_000 else ("new", step // 500))

    acct._begin = begin  # type: ignore[method-assign]
    acct._finish = finish  # type: ignore[method-assign]
    acct._leaks.next_check = float("inf")
    return acct


def _durations(seed: int, n: int) -> list[float]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        base = 1e-3 if i < 1_500 else 1.6e-3  # a shift of the step time: the drift check wakes
        d = base * (1 + 0.05 * rng.random())
        if rng.random() < 0.004:
            d *= 8  # an outlier step (an evaluation pass, a checkpoint)
        out.append(d)
    return out


def _state(acct: OpAccountant) -> dict[str, Any]:
    s = acct.schedule
    return {"total": s.total, "added": s.added, "plain": list(s.plain), "next": s.next_sample, "wakes": s.wakes,
            "samples": s.samples, "interval": s.interval, "converged": s.converged, "drift": s._drift_count,
            "median": s.median, "wake_above": s.wake_above}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_calls_only_when_due_decide_as_a_call_at_every_step(seed: int) -> None:
    ends, t = [], 0.0
    for d in _durations(seed, 4_000):
        t += d
        ends.append(t)
    durations = [b - a for a, b in zip([0.0] + ends, ends, strict=False)]  # as the tracker reads them
    every: list[int] = []
    reference = _accountant(every)
    reference.on_step_boundary(0, None)
    states = {}
    for i, d in enumerate(durations):
        reference.on_step_boundary(i + 1, d)
        states[i + 1] = _state(reference)

    due: list[int] = []
    acct = _accountant(due)
    now = [0.0]
    tracker = StepTracker(lambda *a, **k: None, CpuBackend(), lambda: now[0])
    calls = []

    def listener(next_step: int, last: float, skipped: Any = ()) -> tuple[float, float]:
        got = acct.on_step_boundary(next_step, last, skipped)
        calls.append(next_step)
        assert _state(acct) == states[next_step], f"step {next_step}"
        return got

    acct.on_step_boundary(0, None)
    tracker.set_due_listener(listener)
    tracker.mode = "manual"
    for end in ends:
        now[0] = end
        tracker._close(end)

    assert due == every and len(every) > 10
    assert reference.schedule.wakes >= 2  # the outliers and the shift were seen
    assert len(calls) < len(durations) / 4  # and most boundaries made no call


def test_a_failed_accountant_asks_for_no_more_calls() -> None:
    acct = _accountant([])
    acct._failed = True
    assert acct.on_step_boundary(5, 1e-3) == (float("inf"), acct.schedule.wake_above)


class _Wakes:
    """The channel as the tracker reads it: the spans of its last wakes."""

    def __init__(self) -> None:
        self.wake_spans: list[tuple[float, float]] = []


def test_a_step_slowed_by_the_probe_s_own_wake_does_not_wake_op_accounting() -> None:
    """A channel wake (the memory sample, the steps' drain) holds the GIL ~1 ms: the step it
    falls in is slow for the probe's own work. Op accounting's outlier wake is for something
    new (a phase, a recompile): such a step is told to it at its next due call, not as one."""
    now = [0.0]
    tracker = StepTracker(lambda *a, **k: None, CpuBackend(), lambda: now[0])
    wakes = _Wakes()
    tracker.wakes = wakes
    heard: list[tuple[int, float]] = []

    def listener(next_step: int, last: float, skipped: Any = ()) -> tuple[float, float]:
        heard.append((next_step, last))
        return next_step + 50, 0.004  # due again in 50 steps; a step over 4 ms is an outlier

    tracker.set_due_listener(listener)
    tracker.mode = "manual"
    t = 0.0
    for i in range(40):
        start = t
        t += 0.010 if i in (10, 20) else 0.001
        if i == 10:
            wakes.wake_spans.append((start + 0.001, start + 0.002))  # the probe's wake, inside step 10
        now[0] = t
        tracker._close(t)
    steps_heard = [n for n, _ in heard]
    assert 21 in steps_heard  # step 20: slow with no wake in it, an outlier
    assert 11 not in steps_heard  # step 10: slow for the probe's wake
    tracker.wakes = None  # no channel: every slow step is heard
    heard.clear()
    tracker._due_at = 100
    now[0] = t = t + 0.010
    tracker._close(t)
    assert heard and heard[0][0] == 41
