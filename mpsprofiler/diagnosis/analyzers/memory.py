"""Memory growth facts: leaks, cache growth, host growth and swap, after warm-up.

Three patterns (figures from torch/mps/__init__.py and torch.cuda.memory) are told apart:

* tensor memory growing step after step: references kept alive (``total += loss``,
  outputs appended to a list). Measured per step from the device's allocated bytes on
  MPS/CUDA, and from the process RSS on the CPU, where tensors live in host memory;
* the device cache growing while tensor memory is flat: the allocator keeps buffers of
  every size it saw (varying shapes);
* host memory or swap growing: host-side copies, DataLoader workers, the machine
  running out.

Growth is a Theil–Sen slope with a Mann–Kendall significance (:mod:`.robust`), and a
``leak_consistency`` that compares the second half of the run with the whole, so a
ramp that levels off (caches filling during the first epoch) is not called a leak.

A finding must hold across runs, so a level that wanders inside a band (340-420 MiB
over five epochs, caches filling and freeing) must not read as a leak in the one run
where it happened to end high: ``leak_halves_significance`` asks each half of the
steady state to rise on its own, on thinned samples (neighbouring samples of a slow
wave are not independent, and Mann–Kendall would count them as evidence), and
``leak_noise_ratio`` asks the growth to be large against the level's own scatter.

Memory pressure is the run's only when the run holds much of the memory in use
(``memory_run_share`` at the tightest moment) and the shortage lasts
(``sys_available_held_min_share``: the lowest level held over ``SUSTAIN`` samples in a
row); another program's brief spike is reported as such, with the figures.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...session.memory import MemPoint
from ...session.session import Session
from ...session.steps import StepPoint
from . import robust
from .common import MIB, is_asynchronous, rounded
from .registry import analyzer

MIN_STEPS = 8
"""Fewer steady steps than this say nothing about a per-step trend."""
MIN_SAMPLES = 5
"""Memory samples come every 0.5 s: 5 of them are the shortest window worth a slope."""
GROWING = 0.95
"""Significance from which growth counts as real for projections (Scalene: 0.95)."""
HALF_POINTS = 24
"""Samples per half for the halves' Mann–Kendall test: thinned so that the samples of one
slow wave (0.5 s apart) do not count as many independent rises."""
NOISE_FLOOR = MIB
"""Scatter below 1 MiB counts as 1 MiB: a perfectly straight series has no scatter."""
SUSTAIN = 3
"""Samples in a row (0.5 s apart: 1.5 s) a memory shortage must last to count as pressure."""
LOW_AVAILABLE = 0.08
"""The share of the machine's memory available at which it counts as short (memory-pressure.yaml)."""


@dataclass(frozen=True)
class Growth:
    trend: robust.Trend
    consistency: float | None
    """Slope over the second half / slope over the whole (0..1); None unless rising."""
    halves_significance: float | None = None
    """The smaller Mann–Kendall significance of the two halves, each thinned to ``HALF_POINTS``."""
    noise_ratio: float | None = None
    """Growth over the span / the scatter around the fitted line (10th to 90th percentile)."""


MEMORY_FACTS: tuple[str, ...] = (
    "alloc_flat", "alloc_growth_mib_per_100_steps", "cache_growth_from_step", "cache_growth_limit_share",
    "cache_growth_mib", "cache_growth_mib_per_min", "cache_growth_per_min", "cache_growth_significance",
    "leak_consistency", "leak_from_step", "leak_growth_kib_per_step", "leak_growth_mib",
    "leak_growth_mib_per_100_steps", "leak_growth_per_step", "leak_growth_share", "leak_significance",
    "leak_source", "leak_to_step", "steps_until_oom", "swap_growth", "swap_growth_mib", "sys_available_min",
    "sys_available_min_share", "leak_halves_significance", "leak_noise_ratio", "cache_growth_noise_ratio",
    "sys_available_held_min_share", "sys_available_low_samples", "sys_available_min_mib", "memory_run_share",
    "memory_run_mib", "memory_others_mib", "memory_others_top", "memory_others_largest", "memory_others_largest_mib",
    *(f"{p}_growth_{s}" for p in ("alloc", "rss_step") for s in ("per_step", "significance", "total")),
    *(f"{p}_growth_{s}" for p in ("rss", "worker_rss") for s in ("per_min", "mib_per_min", "significance", "mib")),
)
"""Every fact the ``memory`` analyzer may return (declared: no other analyzer may provide one)."""


@analyzer("memory", provides=MEMORY_FACTS)
def memory_facts(session: Session) -> dict[str, Any]:
    steps = session.steps
    held = [p for p in steps.series.points() if p.i >= steps.warmup]
    facts: dict[str, Any] = {}
    alloc = None
    if is_asynchronous(session):
        alloc = _alloc_trend(held, session.memory.series.points())
        facts.update(_growth_facts("alloc", alloc, per="step"))
        if alloc is not None:
            facts["alloc_growth_mib_per_100_steps"] = rounded(alloc.trend.slope * 100 / MIB, 3)
            _leak(facts, alloc, held, "Memory held by tensors on the device")
    rss = _rss_step_trend(held, session.memory.series.points())
    facts.update(_growth_facts("rss_step", rss, per="step"))
    if not is_asynchronous(session) and rss is not None:
        _leak(facts, rss, held, "Process memory (RSS, where CPU tensors live)")
    facts.update(_time_growth(session, held, alloc))
    facts.update(_system(session))
    facts["steps_until_oom"] = _steps_until_oom(session, facts)
    return facts


# --------------------------------------------------------------------------- per step


def _alloc_trend(held: list[StepPoint], samples: list[MemPoint]) -> Growth | None:
    """Allocated bytes per step: the probe's reading at each step's end, else samples."""
    pts = [(p.i, p.alloc) for p in held if p.alloc is not None]
    if len(pts) >= MIN_STEPS:
        return _consistent(pts)
    return _sampled_per_step(held, [(m.ts, m.allocated) for m in samples if m.allocated is not None])


def _rss_step_trend(held: list[StepPoint], samples: list[MemPoint]) -> Growth | None:
    return _sampled_per_step(held, [(m.ts, m.rss) for m in samples if m.rss is not None])


def _sampled_per_step(held: list[StepPoint], values: list[tuple[float, int]]) -> Growth | None:
    """Samples taken on a clock, placed on the step axis by the steps' end times."""
    if len(held) < MIN_STEPS:
        return None
    knots_t = [held[0].end - held[0].dur] + [p.end for p in held]
    knots_x = [float(held[0].i)] + [float(p.i + 1) for p in held]
    pts = []
    for ts, value in values:
        if knots_t[0] <= ts <= knots_t[-1]:
            pts.append((_interp(ts, knots_t, knots_x), value))
    if len(pts) < MIN_SAMPLES:
        return None
    return _consistent(pts)


def _interp(t: float, ts: Sequence[float], xs: Sequence[float]) -> float:
    k = bisect_right(ts, t)
    if k <= 0:
        return xs[0]
    if k >= len(ts):
        return xs[-1]
    t0, t1 = ts[k - 1], ts[k]
    if t1 <= t0:
        return xs[k]
    return xs[k - 1] + (xs[k] - xs[k - 1]) * (t - t0) / (t1 - t0)


def _consistent(pts: Sequence[tuple[float, float]]) -> Growth | None:
    trend = robust.trend([p[0] for p in pts], [p[1] for p in pts])
    if trend is None:
        return None
    half = pts[len(pts) // 2 :]
    late = robust.trend([p[0] for p in half], [p[1] for p in half]) if len(half) >= 3 else None
    consistency = None
    if late is not None and trend.slope > 0:
        consistency = max(0.0, min(1.0, late.slope / trend.slope))
    early = [p[1] for p in robust.thin(pts[: len(pts) // 2], HALF_POINTS)]
    later = [p[1] for p in robust.thin(half, HALF_POINTS)]
    halves = min(robust.mann_kendall(early), robust.mann_kendall(later)) if min(len(early), len(later)) >= 3 else None
    return Growth(trend, consistency, halves, _noise_ratio(pts, trend))


def _noise_ratio(pts: Sequence[tuple[float, float]], trend: robust.Trend) -> float:
    """Growth against the scatter around the fitted line: a wandering level whose end
    happens to sit higher than its start has a growth no larger than its scatter."""
    x0 = pts[0][0]
    resid = sorted(y - trend.first - trend.slope * (x - x0) for x, y in robust.thin(pts))
    lo, hi = resid[int(0.1 * (len(resid) - 1))], resid[int(0.9 * (len(resid) - 1))]
    return round(trend.growth / max(hi - lo, NOISE_FLOOR), 3)


def _growth_facts(prefix: str, growth: Growth | None, per: str) -> dict[str, Any]:
    if growth is None:
        return {}
    trend = growth.trend
    return {
        f"{prefix}_growth_per_{per}": round(trend.slope, 1),
        f"{prefix}_growth_significance": round(trend.significance, 4),
        f"{prefix}_growth_total": int(trend.growth),
    }


def _leak(facts: dict[str, Any], growth: Growth, held: list[StepPoint], source: str) -> None:
    trend, consistency = growth.trend, growth.consistency
    base = max(trend.first, 1.0)
    facts.update(
        leak_source=source,
        leak_growth_per_step=round(trend.slope, 1),
        leak_growth_kib_per_step=round(trend.slope / 1024, 1),
        leak_growth_mib_per_100_steps=round(trend.slope * 100 / MIB, 3),
        leak_significance=round(trend.significance, 4),
        leak_consistency=rounded(consistency, 3),
        leak_halves_significance=rounded(growth.halves_significance, 4),
        leak_noise_ratio=growth.noise_ratio,
        leak_growth_mib=round(trend.growth / MIB, 2),
        leak_growth_share=round(trend.growth / base, 4),
        leak_from_step=held[0].i if held else None,
        leak_to_step=held[-1].i if held else None,
    )


# --------------------------------------------------------------------------- over time


def _time_growth(session: Session, held: list[StepPoint], alloc: Growth | None) -> dict[str, Any]:
    """Per-minute growth of the device cache and of host memory after warm-up."""
    samples = session.memory.series.points()
    start = held[0].end - held[0].dur if held else None
    end = held[-1].end if held else None
    window = [m for m in samples if start is not None and start <= m.ts <= (end or m.ts)]
    facts: dict[str, Any] = {}
    if len(window) < MIN_SAMPLES:
        return facts
    cached = [(m.ts, m.cached) for m in window if m.cached is not None]
    if len(cached) >= MIN_SAMPLES and is_asynchronous(session):
        t = robust.trend([p[0] for p in cached], [p[1] for p in cached])
        if t is not None:
            facts["cache_growth_per_min"] = int(t.slope * 60)
            facts["cache_growth_mib_per_min"] = round(t.slope * 60 / MIB, 2)
            facts["cache_growth_significance"] = round(t.significance, 4)
            facts["cache_growth_noise_ratio"] = _noise_ratio(cached, t)
            facts["cache_growth_mib"] = round(t.growth / MIB, 2)
            facts["cache_growth_from_step"] = held[0].i
            limit = session.memory.device_limit
            facts["cache_growth_limit_share"] = round(t.growth / limit, 4) if limit else None
            facts["alloc_flat"] = _alloc_flat(alloc, t.growth)
    for key, attr in (("rss", "rss_total"), ("worker_rss", "rss_children")):
        pts = [(m.ts, getattr(m, attr)) for m in window if getattr(m, attr) is not None]
        t = robust.trend([p[0] for p in pts], [p[1] for p in pts]) if len(pts) >= MIN_SAMPLES else None
        if t is not None:
            facts[f"{key}_growth_per_min"] = int(t.slope * 60)
            facts[f"{key}_growth_mib_per_min"] = round(t.slope * 60 / MIB, 2)
            facts[f"{key}_growth_significance"] = round(t.significance, 4)
            facts[f"{key}_growth_mib"] = round(t.growth / MIB, 2)
    return facts


def _alloc_flat(growth: Growth | None, cache_growth: float) -> bool | None:
    """Tensor memory did not grow much while the cache did (None: nothing to compare)."""
    if growth is None:
        return None
    alloc = growth.trend
    grew = alloc.significance >= GROWING and alloc.growth >= max(16 * MIB, 0.1 * max(cache_growth, 0.0))
    return not grew


def _system(session: Session) -> dict[str, Any]:
    mem = session.memory
    facts: dict[str, Any] = {}
    if mem.min_sys_available is not None and mem.sys_total:
        facts["sys_available_min"] = mem.min_sys_available
        facts["sys_available_min_share"] = round(mem.min_sys_available / mem.sys_total, 4)
    facts.update(_pressure(session))
    first = mem.first.swap_used if mem.first is not None else None
    peak = mem.peak.get("swap_used")
    if first is not None and peak is not None:
        facts["swap_growth"] = max(0, peak - first)
        facts["swap_growth_mib"] = round(max(0, peak - first) / MIB, 1)
    return facts


def _pressure(session: Session) -> dict[str, Any]:
    """Whose memory it was when the machine ran short, and whether the shortage lasted.

    The run's memory is its RSS, its child processes' (DataLoader workers) and, on unified
    memory (MPS), the device cache; the memory in use is the machine's total less what
    was available. Figures at the sample with the least memory available.
    """
    mem = session.memory
    total = mem.sys_total
    pts = [m for m in mem.series.points() if m.sys_available is not None and m.rss_total is not None]
    if not total or not pts:
        return {}
    avail = [int(m.sys_available or 0) for m in pts]
    windows = [max(avail[k : k + SUSTAIN]) for k in range(len(avail) - SUSTAIN + 1)]
    tight = min(range(len(pts)), key=lambda k: avail[k])
    m = pts[tight]
    own = (m.rss_total or 0) + ((m.cached or 0) if session.device_kind == "mps" else 0)
    used = max(total - avail[tight], 1)
    return {
        "sys_available_held_min_share": round(min(windows) / total, 4) if windows else None,
        "sys_available_low_samples": sum(1 for a in avail if a <= LOW_AVAILABLE * total),
        "sys_available_min_mib": round(avail[tight] / MIB, 1),
        "memory_run_share": round(min(1.0, own / used), 4),
        "memory_run_mib": round(own / MIB, 1),
        "memory_others_mib": round(max(0, used - own) / MIB, 1),
        **_others_named(mem.others),
    }


def _others_named(others: list[tuple[str, int, int]]) -> dict[str, Any]:
    """The largest other programs as ``top`` shows them (name, pid, resident memory), read by
    the probe while memory was short (``probe/others.py``); nothing when none was read."""
    if not others:
        return {}
    name, pid, rss = others[0]
    return {
        "memory_others_largest": f"{name} (pid {pid})",
        "memory_others_largest_mib": round(rss / MIB, 1),
        "memory_others_top": ", ".join(f"{n} (pid {p}) {fmt_mib(r)}" for n, p, r in others),
    }


def fmt_mib(size: int) -> str:
    """``1.2 GiB`` or ``850 MiB``: resident memory as top's summary reads it."""
    return f"{size / (1 << 30):.1f} GiB" if size >= 1 << 30 else f"{size / MIB:,.0f} MiB"


def _steps_until_oom(session: Session, facts: dict[str, Any]) -> int | None:
    """Steps left before the growth meets the limit; None when nothing grows."""
    rate = facts.get("leak_growth_per_step")
    if not rate or rate <= 0 or (facts.get("leak_significance") or 0) < GROWING:
        return None
    mem = session.memory
    last = mem.last
    if last is None:
        return None
    if is_asynchronous(session):
        used = last.cached if last.cached is not None else last.allocated
        if mem.device_limit is None or used is None:
            return None
        headroom = mem.device_limit - used
    else:
        if last.sys_available is None:
            return None
        headroom = last.sys_available
    return max(0, int(headroom / rate))
