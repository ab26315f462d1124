"""Warm-up facts: how many leading steps were slow, and what they cost.

Metal compiles kernels on first use, CUDA autotunes, caches fill: the first steps are
slow on every device, so a benchmark that includes them misjudges the run.
Step 0 also carries the script's start-up (imports, building the model and
the data), which is why the rule looks at warm-ups longer than that one step, except
when step 0 alone is very long (torch.compile compiles the model in its first call).

The steps mpsprof sampled for op accounting (``session.ops.sampled``) are slow by its own
doing (every op recorded): they are judged as steady steps, never as warm-up, and never
the "slowest warm-up step" (issue 27: on a transformer the slowest "warm-up" steps were
those). Step 0 is kept as it is: it is slow for the framework's reasons either way.
"""

from __future__ import annotations

from typing import Any

from ...session.session import Session
from ...session.steps import detect_warmup
from .common import rounded
from .registry import analyzer

WARMUP_FACTS: tuple[str, ...] = (
    "benchmark_from_step", "first_step_cost_s", "first_step_s", "warmup_after_first_cost_s", "warmup_cost_s",
    "warmup_first_step_ms", "warmup_first_step_ratio", "warmup_s", "warmup_share", "warmup_slowest_step_ms",
    "warmup_start_step", "warmup_steps",
)
"""Every fact the ``warmup`` analyzer may return (declared: no other analyzer may provide one)."""


@analyzer("warmup", provides=WARMUP_FACTS)
def warmup_facts(session: Session) -> dict[str, Any]:
    steps = session.steps
    w = steps.warmup
    med = steps.quantile(0.5)
    sampled = {i for i in session.ops.sampled if i > 0}
    if sampled and steps.early:
        own = [p.dur for p in steps.early if p.i not in sampled]
        ref = sorted(own[len(own) // 2:])[len(own[len(own) // 2:]) // 2] if own else None
        if ref is not None:
            w = detect_warmup([ref if p.i in sampled else p.dur for p in steps.early])
    facts: dict[str, Any] = {"warmup_steps": w}
    if not steps.early:
        return facts
    warm = [p for p in steps.early[:w] if p.i not in sampled]
    warm_s = sum(p.dur for p in warm)
    facts["warmup_s"] = rounded(warm_s, 4)
    facts["warmup_cost_s"] = rounded(steps.warmup_cost(), 4)
    after_first = [p for p in steps.early[1:w] if p.i not in sampled]
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
    facts["benchmark_from_step"] = w
    facts["warmup_start_step"] = steps.early[0].i
    return facts
