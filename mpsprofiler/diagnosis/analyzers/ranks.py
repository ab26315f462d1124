"""Cross-rank facts for distributed jobs: who holds the job back, and why.

In DDP every rank waits for the slowest one inside the gradient all-reduce, so step
times even out across ranks; the straggler shows in what it does *outside* the
collectives. We measure each rank's data wait (and its step time, for jobs whose ranks
do not synchronise every step), so a rank that waits much longer for data than the
others is the straggler, with its input pipeline as the cause.
"""

from __future__ import annotations

from statistics import median
from typing import Any

from ...session.session import Session
from ..facts import analyzer

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
    return {
        "rank": rank,
        "steps": steps.count,
        "step_ms": None if med is None else med * 1e3,
        "wait_ms": (wait / n * 1e3) if n else None,
        "wait_share": (wait / dur) if dur > 0 else None,
        "peak": peak,
        "limit": limit,
    }


def _table(rows: list[dict[str, Any]]) -> str:
    from ...units import fmt_bytes, fmt_pct

    lines = ["| rank | steps | median step | data wait / step | wait share | peak memory |",
             "|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        step = "–" if r["step_ms"] is None else f"{r['step_ms']:.1f} ms"
        wait = "–" if r["wait_ms"] is None else f"{r['wait_ms']:.1f} ms"
        lines.append(f"| {r['rank']} | {r['steps']} | {step} | {wait} | {fmt_pct(r['wait_share'])} | {fmt_bytes(r['peak'])} |")
    return "\n".join(lines)


@analyzer("ranks")
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
    if job_step and wait_excess / job_step >= STRAGGLER_SHARE:
        straggler, cause, excess = by_wait, "data wait", wait_excess
    elif others_step and step_excess / others_step >= STRAGGLER_SHARE:
        straggler, cause, excess = by_step, "slower steps", step_excess
    if straggler is not None:
        facts.update(
            straggler_rank=straggler["rank"],
            straggler_cause=cause,
            straggler_excess_ms=excess,
            straggler_share=excess / job_step if job_step else None,
            straggler_wait_ms=straggler["wait_ms"],
            others_wait_ms=others_wait,
            straggler_step_ms=straggler["step_ms"],
        )
    near = [r for r in rows if r["peak"] and r["limit"]]
    if near:
        top = max(near, key=lambda r: r["peak"] / r["limit"])
        facts.update(rank_peak_limit_share=top["peak"] / top["limit"], rank_peak_limit_rank=top["rank"])
        peaks = [r["peak"] for r in near]
        facts["rank_memory_imbalance"] = max(peaks) / min(peaks) if min(peaks) else None
    return facts
