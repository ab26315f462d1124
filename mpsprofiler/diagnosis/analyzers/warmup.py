"""Warm-up facts: how many leading steps were slow, and what they cost.

Metal compiles kernels on first use, CUDA autotunes, caches fill: the first steps are
slow on every device, so a benchmark that includes them misjudges the run.
Step 0 also carries the script's start-up (imports, building the model and
the data), which is why the rule looks at warm-ups longer than that one step, except
when step 0 alone is very long (torch.compile compiles the model in its first call) and
not by waiting for its first batch (``first_step_wait_share``: DataLoader workers started
by spawn took 19 s of a 19 s step 0 on a busy machine, and read as compilation).

The steps mpsprof sampled for op accounting (``session.ops.sampled``) are slow by its own
doing (every op recorded): they are judged as steady steps, never as warm-up, and never
the "slowest warm-up step" (issue 27: on a transformer the slowest "warm-up" steps were
those). Step 0 is kept as it is: it is slow for the framework's reasons either way.

Steps slow by the script's own work are set aside the same way (issue 27: long-warmup on
every run of minGPT's adder, whose "warm-up" was its evaluation of the whole training set
at iteration 0): see ``own_work_steps``. Warm-up is the framework's (kernel compilation,
allocator growth, torch.compile), an evaluation is the script's.
"""

from __future__ import annotations

from typing import Any

from ...session.session import Session
from ...session.steps import StepPoint
from ...session.warmup import framework_warmup, set_aside
from ...session.warmup import warmup_cost as _warmup_cost
from .common import rounded
from .registry import analyzer

WARMUP_FACTS: tuple[str, ...] = (
    "benchmark_from_step", "first_step_cost_s", "first_step_s", "first_step_wait_share", "warmup_after_first_cost_s",
    "warmup_cost_s",
    "warmup_first_step_ms", "warmup_first_step_ratio", "warmup_own_work_s", "warmup_own_work_steps", "warmup_s",
    "warmup_above_steady_share", "warmup_core_wait_share", "warmup_share", "warmup_slowest_step_ms", "warmup_start_step", "warmup_steps",
    "warmup_sync_line",
)
"""Every fact the ``warmup`` analyzer may return (declared: no other analyzer may provide one)."""

@analyzer("warmup", provides=WARMUP_FACTS)
def warmup_facts(session: Session) -> dict[str, Any]:
    steps = session.steps
    w = framework_warmup(session)  # the summary's headline counts it the same way
    med = steps.quantile(0.5)
    sampled, own_work = set_aside(session)
    aside = sampled | own_work
    # the device whose queued work the timing snippet waits for (rules/long-warmup.yaml:
    # torch.mps.synchronize() raises on a machine without an MPS device)
    facts: dict[str, Any] = {"warmup_steps": w, "warmup_sync_line": session.device_kind or "cpu"}
    if not steps.early:
        return facts
    warm = [p for p in steps.early[:w] if p.i not in aside]
    warm_s = sum(p.dur for p in warm)
    facts["warmup_s"] = rounded(warm_s, 4)
    facts["warmup_cost_s"] = rounded(_warmup_cost(session), 4)
    if own_work:
        facts["warmup_own_work_steps"] = len(own_work)
        facts["warmup_own_work_s"] = rounded(sum(p.dur for p in steps.early if p.i in own_work), 2)
    after_first = [p for p in steps.early[1:w] if p.i not in aside]
    p90 = steps.quantile(0.9)
    if p90:
        # a warm-up is a run of steps slower than the steady ones, not a stretch of a loaded
        # machine's noise (issue 27: on a shared 2-core machine a word model's steps took
        # 2 ms or 200 ms as the scheduler gave it a core, and five of them read as warm-up)
        above = sum(1 for p in after_first if p.dur > p90)
        facts["warmup_above_steady_share"] = rounded(above / len(after_first)) if after_first else 0.0
    if w >= 3:
        facts["warmup_core_wait_share"] = _core_wait_share(session, steps.early, w, own_work, med)
    facts["warmup_after_first_cost_s"] = rounded(
        max(0.0, sum(p.dur for p in after_first) - (med or 0.0) * len(after_first)), 4
    )
    facts["warmup_first_step_ms"] = rounded(steps.early[0].dur * 1000.0, 3)
    facts["warmup_slowest_step_ms"] = rounded(max(p.dur for p in warm) * 1000.0, 3) if warm else None
    run_s = steps.total_dur
    facts["warmup_share"] = rounded(warm_s / run_s) if run_s > 0 else None
    if med:
        facts["warmup_first_step_ratio"] = rounded(steps.early[0].dur / med, 2)
        facts["first_step_s"] = rounded(steps.early[0].dur, 2)
        facts["first_step_cost_s"] = rounded(max(0.0, steps.early[0].dur - med), 2)
    first = steps.early[0]
    if first.dur > 0:
        # step 0 spent waiting for its batch is the DataLoader's start (workers started by
        # spawn import torch and the script first), not compilation: the loader rules say it
        facts["first_step_wait_share"] = rounded(min(1.0, first.wait / first.dur))
    facts["benchmark_from_step"] = w
    facts["warmup_start_step"] = steps.early[0].i
    return facts


MIN_WINDOW_S = 1.0
"""Seconds a window needs for a rate: memory samples (with the run-queue seconds) come every
0.5 s."""


def _core_wait_share(session: Session, early: list[StepPoint], w: int, own_work: set[int],
                     med: float | None) -> float | None:
    """How much of the warm-up's extra time (after step 0) the training thread spent waiting
    for a core, beyond what it waited in the steady steps; None where it cannot be told
    (not Linux, a window shorter than ``MIN_WINDOW_S``).

    Kernel compilation, autotuning and cache fills keep the process working, or waiting for
    the device or a compiler service. On a machine shared with busier programs the steps
    are slow because the thread waits for a core (issue 27: a minGPT run's first 33 steps
    at 0.3 s, then 0.06 s once the other programs finished): that is the machine, no
    warm-up. The window starts after the last step of the script's own work in it.
    """
    points = [m for m in session.memory.series.points() if m.runq_main_s is not None]
    start = max([k for k in range(w) if early[k].i in own_work], default=0)
    warm = _delta(points, early[start].end, early[w - 1].end)
    steady = _delta(points, early[w - 1].end, early[-1].end)
    if warm is None or steady is None or not med:
        return None
    steps = [p for p in early[start + 1 : w] if p.i not in own_work]
    extra = sum(p.dur for p in steps) - med * len(steps)
    if extra <= 0:
        return None
    (warm_wait, warm_wall), (steady_wait, steady_wall) = warm, steady
    waited = warm_wait - steady_wait / steady_wall * warm_wall
    return rounded(max(0.0, min(1.0, waited / extra)), 3)


def _delta(points: list[Any], t0: float, t1: float) -> tuple[float, float] | None:
    """(run-queue seconds, wall seconds) between the samples around ``t0`` and ``t1``."""
    before = [m for m in points if m.ts <= t0]
    after = [m for m in points if m.ts >= t1]
    inside = [m for m in points if t0 <= m.ts <= t1]
    a = before[-1] if before else (inside[0] if inside else None)
    b = after[0] if after else (inside[-1] if inside else None)
    if a is None or b is None or b.ts - a.ts < MIN_WINDOW_S:
        return None
    return max(0.0, b.runq_main_s - a.runq_main_s), b.ts - a.ts
