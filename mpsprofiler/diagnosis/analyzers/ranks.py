"""Cross-rank facts for distributed jobs: who holds the job back, and why.

In DDP every rank waits for the slowest one inside the gradient all-reduce, so step
times even out across ranks; the straggler shows in what it does *outside* the
collectives. Each rank's step is split where the time goes (the probe times backward
passes, which in DDP include the all-reduce wait; NCCL and gloo alike, since DDP's
backward ends only when its buckets are reduced): data wait, its own work before the
backward pass (forward and the code between steps), the backward pass, and the work
after it (the optimizer step). The rank that spends clearly more than the others in a
phase of its own work, while they wait longer in backward, holds the job back: named
with that phase. Jobs whose ranks do not synchronise every step fall back on step time.
"""

from __future__ import annotations

from statistics import median
from typing import Any

from ...session.session import Session
from .registry import analyzer

STRAGGLER_SHARE = 0.10
"""A rank whose extra wait (or step time) is 10% of the job's step holds it back measurably."""


def _rank_row(rank: int, s: Session) -> dict[str, Any]:
    steps = s.steps
    med = steps.quantile(0.5)
    n = steps.steady_count
    dur, wait = steps.steady_sums()
    mem = s.memory
    peak = mem.peak_allocated or mem.peak.get("rss_total")
    limit = mem.device_limit if mem.peak_allocated else mem.sys_total
    phases = steps.phase_means() or {}
    return {
        "rank": rank,
        "own_ms": phases["own"] * 1e3 if phases else None,
        "backward_ms": phases["backward"] * 1e3 if phases else None,
        "after_ms": phases["after"] * 1e3 if phases else None,
        "steps": steps.count,
        "step_ms": None if med is None else med * 1e3,
        "wait_ms": (wait / n * 1e3) if n else None,
        "wait_share": (wait / dur) if dur > 0 else None,
        "peak": peak,
        "limit": limit,
    }


def _table(rows: list[dict[str, Any]]) -> str:
    from ...units import fmt_bytes, fmt_pct

    def ms(v: float | None) -> str:
        return "–" if v is None else f"{v:.1f} ms"

    lines = ["| rank | steps | median step | data wait / step | own work / step | backward / step | wait share | peak memory |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['rank']} | {r['steps']} | {ms(r['step_ms'])} | {ms(r['wait_ms'])} | {ms(r['own_ms'])} "
                     f"| {ms(r['backward_ms'])} | {fmt_pct(r['wait_share'])} | {fmt_bytes(r['peak'])} |")
    return "\n".join(lines)


PHASES = (("own_ms", "its own code (forward and the code between steps)"),
          ("after_ms", "the optimizer step and the code after backward"))


def _work_straggler(rows: list[dict[str, Any]], job_step: float
                    ) -> tuple[dict[str, Any], str, float, dict[str, Any]] | None:
    """The rank whose own work (outside backward) exceeds the others' by 10% of the job's
    step while the others spend correspondingly longer in backward, waiting for it; with
    the figures of ``straggler_detail``'s ``phase`` sentence."""
    phased = [r for r in rows if r["own_ms"] is not None and r["backward_ms"] is not None]
    if len(phased) < 2 or not job_step:
        return None
    best = None
    for key, name in PHASES:
        top = max(phased, key=lambda r: r[key] or 0.0)
        others = [r for r in phased if r is not top]
        excess = (top[key] or 0.0) - median(r[key] or 0.0 for r in others)
        others_bwd = median(r["backward_ms"] for r in others)
        waited = others_bwd - top["backward_ms"]  # the others' extra time in backward
        if excess / job_step >= STRAGGLER_SHARE and waited >= 0.5 * excess and (best is None or excess > best[2]):
            detail = {"straggler_detail": "phase", "straggler_phase_ms": top[key],
                      "others_phase_ms": median(r[key] or 0.0 for r in others),
                      "others_backward_ms": others_bwd, "straggler_backward_ms": top["backward_ms"]}
            best = (top, name, excess, detail)
    return best


RANK_FACTS: tuple[str, ...] = (
    "job_step_ms", "others_wait_ms", "rank_count", "rank_memory_imbalance", "rank_peak_limit_rank",
    "rank_peak_limit_share", "rank_step_spread", "rank_table", "rank_wait_share_spread",
    "rank_wait_spread_ms", "straggler_cause", "straggler_detail", "straggler_excess_ms", "straggler_phase",
    "straggler_rank", "straggler_share", "straggler_step_ms", "straggler_wait_ms",
    "others_step_ms", "straggler_phase_ms", "others_phase_ms", "straggler_backward_ms", "others_backward_ms",
)
"""Every fact the ``ranks`` analyzer may return (declared: no other analyzer may provide one)."""


@analyzer("ranks", provides=RANK_FACTS)
def rank_facts(session: Session) -> dict[str, Any]:
    if len(session.ranks) < 2:
        return {"rank_count": len(session.ranks) or None}
    rows = [_rank_row(r, s) for r, s in sorted(session.ranks.items())]
    facts: dict[str, Any] = {"rank_count": len(rows), "rank_table": _table(rows)}
    timed = [r for r in rows if r["step_ms"] is not None and r["wait_ms"] is not None]
    if len(timed) < 2:
        return facts
    job_step = median(r["step_ms"] for r in timed)
    facts["job_step_ms"] = job_step
    by_wait = max(timed, key=lambda r: r["wait_ms"])
    others_wait = median(r["wait_ms"] for r in timed if r is not by_wait)
    wait_excess = by_wait["wait_ms"] - others_wait
    by_step = max(timed, key=lambda r: r["step_ms"])
    others_step = median(r["step_ms"] for r in timed if r is not by_step)
    step_excess = by_step["step_ms"] - others_step
    facts.update(
        rank_wait_spread_ms=wait_excess,
        rank_step_spread=(step_excess / others_step) if others_step else None,
        rank_wait_share_spread=max(r["wait_share"] or 0 for r in timed) - min(r["wait_share"] or 0 for r in timed),
    )
    straggler = None
    # straggler_detail: a code rules/distributed.yaml words, with its figures
    cause, excess, detail = "", 0.0, {}  # set with straggler
    work = _work_straggler(timed, job_step)
    if job_step and wait_excess / job_step >= STRAGGLER_SHARE:
        straggler, cause, excess = by_wait, "data wait", wait_excess
        detail = {"straggler_detail": "data_wait"}  # straggler_wait_ms against others_wait_ms
    elif work is not None:
        straggler, cause, excess, detail = work
    elif others_step and step_excess / others_step >= STRAGGLER_SHARE:
        straggler, cause, excess = by_step, "slower steps", step_excess
        detail = {"straggler_detail": "slower_steps", "others_step_ms": others_step}
    if straggler is not None:
        facts.update(
            straggler_rank=straggler["rank"],
            straggler_cause=cause,
            straggler_excess_ms=excess,
            straggler_share=excess / job_step if job_step else None,
            straggler_wait_ms=straggler["wait_ms"],
            others_wait_ms=others_wait,
            straggler_step_ms=straggler["step_ms"],
            straggler_phase=cause,
            **detail,
        )
    else:  # timed ranks and none a straggler: said, so data-loading-imbalance can tell (its
        # `straggler_rank is None` named an absent fact before, and the rule never fired)
        facts["straggler_rank"] = None
    near = [r for r in rows if r["peak"] and r["limit"]]
    if near:
        top = max(near, key=lambda r: r["peak"] / r["limit"])
        facts.update(rank_peak_limit_share=top["peak"] / top["limit"], rank_peak_limit_rank=top["rank"])
        peaks = [r["peak"] for r in near]
        facts["rank_memory_imbalance"] = max(peaks) / min(peaks) if min(peaks) else None
    return facts
