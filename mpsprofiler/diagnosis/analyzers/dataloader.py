"""Data-loading facts: how long steps wait for batches, and what the DataLoader should be.

The wait share is measured on steady-state steps only (warm-up would inflate it). The
``num_workers`` suggestion is computed, not guessed: enough workers to hide the
measured loading time behind the measured compute time, starting at 2 as the field
notes advise, capped so workers do not fight the training for cores.
"""

from __future__ import annotations

import math
from statistics import median
from typing import Any

from ...session.session import Session
from ...session.steps import StepPoint
from ..facts import analyzer
from .common import (
    compute_cores,
    is_asynchronous,
    num,
    rounded,
    start_method,
    training_loader,
)

STALL_STEP_SHARE = 0.15
"""A step "stalls" when 15% of it is data wait: the TraceML wait-share warning level."""
START_WORKERS = 2
"""Field notes (section 0): start num_workers at 2 and increase while the wait falls."""


@analyzer("dataloader")
def dataloader_facts(session: Session) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    steps = session.steps
    steady = steps.steady
    med = steps.quantile(0.5)
    facts["steady_steps"] = steps.steady_count
    facts["last_step"] = steps.last_index if steps.last_index >= 0 else None
    facts["step_ms"] = rounded(med * 1000.0 if med is not None else None, 3)
    facts["data_wait_share"] = rounded(steps.data_wait_share())
    # None where unknown (the CPU is never "busy elsewhere"): rules test it with `is None`
    facts["device_idle_share_while_waiting"] = None
    if is_asynchronous(session):
        seen = steps.idle_waits + steps.busy_waits
        facts["device_idle_share_while_waiting"] = rounded(steps.idle_waits / seen) if seen else None
    loader = training_loader(session)
    facts["dataloader_count"] = len(session.dataloaders)
    workers = _opt_int(loader.get("num_workers")) if loader else None
    respawn, restarts = _respawn(session, loader, workers) if loader else ({}, set())
    # the loading wait proper: epoch starts that waited for restarted workers are
    # worker-respawn's business, and more workers would not help them
    dur, wait, n = _steady_sums(session, restarts)
    share = min(1.0, wait / dur) if dur > 0 else None
    facts["loading_wait_share"] = rounded(share)
    facts["data_wait_ms"] = rounded(wait / n * 1000.0, 3) if n else None
    facts["compute_ms"] = rounded(max(0.0, dur - wait) / n * 1000.0, 3) if n else None
    facts["first_stall_step"] = _first_stall([p for p in steady if p.i not in restarts])
    if loader is None:
        return facts
    facts["num_workers"] = workers
    facts["persistent_workers"] = bool(loader.get("persistent_workers"))
    facts["prefetch_factor"] = _opt_int(loader.get("prefetch_factor"))
    facts["pin_memory"] = bool(loader.get("pin_memory"))
    facts["batch_size"] = _opt_int(loader.get("batch_size"))
    facts["worker_start_method"] = start_method(session, loader)
    facts["batch_size_arg"] = str(facts["batch_size"])  # `batch_size=None` is a valid setting
    facts["loader_settings"] = _settings(loader, workers)
    facts.update(_suggest_workers(session, workers, share, facts["data_wait_ms"], facts["compute_ms"]))
    facts["suggested_prefetch_factor"] = max(4, (facts["prefetch_factor"] or 2) * 2)
    facts.update(respawn)
    return facts


def _settings(loader: dict[str, Any], workers: int | None) -> str:
    """The loader's relevant arguments as written in code (prefetch only applies with workers)."""
    parts = [f"num_workers={workers}"]
    if workers:
        parts.append(f"prefetch_factor={loader.get('prefetch_factor')}")
        parts.append(f"persistent_workers={bool(loader.get('persistent_workers'))}")
    parts.append(f"pin_memory={bool(loader.get('pin_memory'))}")
    return ", ".join(parts)


def _steady_sums(session: Session, skip: set[int]) -> tuple[float, float, int]:
    """Steady (duration, wait, count) without the steps in ``skip``."""
    steps = session.steps
    dur, wait = steps.steady_sums()
    n = steps.steady_count
    for p in steps.steady:
        if p.i in skip:
            dur -= p.dur
            wait -= p.wait
            n -= 1
    return max(0.0, dur), max(0.0, wait), n


def _first_stall(steady: list[StepPoint]) -> int | None:
    for p in steady:
        if p.dur > 0 and p.wait >= STALL_STEP_SHARE * p.dur:
            return p.i
    return None


def _suggest_workers(
    session: Session, workers: int | None, share: float | None, wait_ms: float | None, compute_ms: float | None
) -> dict[str, Any]:
    """``suggested_num_workers`` and the reason, in words, for the finding's fix."""
    cores, what = compute_cores(session.env)
    current = workers or 0
    cap = max(1, cores - 1) if cores else None
    stalled = share is not None and share >= STALL_STEP_SHARE
    needed = None
    if stalled and wait_ms and compute_ms and compute_ms > 0:
        # n workers deliver n batches per load time L; they keep up when L / n <= compute.
        # L is the wait itself with no workers; with n workers a step lasts L / n.
        load_ms = wait_ms if current == 0 else current * (wait_ms + compute_ms)
        needed = max(1, math.ceil(load_ms / compute_ms))
    if not stalled:
        target = current or min(START_WORKERS, cap or START_WORKERS)
        reasons = ["the steps do not wait for data: keep the loader as it is"]
    else:
        target = START_WORKERS
        reasons = [f"start at {START_WORKERS} (field notes)"]
        if needed is not None and needed > target:
            target = needed
            reasons.append(f"{needed} to hide {wait_ms:.1f} ms of loading per step behind {compute_ms:.1f} ms of compute")
        if cap is not None and target > cap:
            target = cap
            reasons.append(f"at most {cap} = {cores} {what} - 1 for the training process")
        if target < current + 1:
            target = current + 1
            note = "one more than now, since steps still wait"
            if cap is not None and target > cap:
                note += f"; beyond the {cores} {what} more workers compete for CPU, so make loading cheaper too"
            reasons.append(f"at least {target}: {note}")
    return {
        "cores_for_workers": cores,
        "num_workers_needed": needed,
        "suggested_num_workers": target,
        "num_workers_reason": "; ".join(reasons),
    }


def _respawn(
    session: Session, loader: dict[str, Any], workers: int | None
) -> tuple[dict[str, Any], set[int]]:
    """Workers re-started at every epoch: measurable once a loader was iterated twice.

    Every batch the probe counted came from some loader; more batches than all loaders
    hold together means some loader was iterated again, which without
    ``persistent_workers`` starts its workers again. Returns the facts and the steps
    that began an epoch with restarted workers.
    """
    if not workers or loader.get("persistent_workers"):
        return {}, set()
    lengths = [_opt_int(d.get("len")) for d in session.dataloaders.values()]
    if any(not n for n in lengths):
        return {}, set()
    total = session.steps.total_batches
    capacity = sum(n for n in lengths if n)
    out: dict[str, Any] = {"workers_respawn_each_epoch": total > capacity}
    length = _opt_int(loader.get("len"))
    if len(session.dataloaders) != 1 or not length or total <= capacity:
        return out, set()
    out["epochs_seen"] = -(-total // length)
    firsts, others = _epoch_starts(session, length)
    if not firsts or not others:
        return out, set()
    # worker start-up shows in the whole step (iter() forks/spawns, then the first batch
    # waits for the new worker), so the cost is the extra duration of those steps
    base = median(p.dur for p in others)
    extra = [max(0.0, p.dur - base) for p in firsts]
    cost = sum(extra)
    total_s = session.steps.total_dur
    out["respawn_wait_ms"] = rounded(median(extra) * 1000.0, 3)
    out["respawn_cost_s"] = rounded(cost, 4)
    out["respawn_share"] = rounded(cost / total_s) if total_s > 0 else None
    out["respawn_first_step"] = firsts[0].i
    return out, {p.i for p in firsts}


def _epoch_starts(session: Session, length: int) -> tuple[list[StepPoint], list[StepPoint]]:
    """Steps holding the first batch of a later epoch, and the other steady steps."""
    steps = session.steps
    firsts: list[StepPoint] = []
    others: list[StepPoint] = []
    consumed = 0
    for p in steps.early:  # one by one from the first step: the batch count stays exact
        last = consumed + p.batches - 1
        if p.batches > 0 and last >= length and (last // length) * length >= consumed:
            firsts.append(p)
        elif p.i >= steps.warmup:
            others.append(p)
        consumed += p.batches
    return firsts, others


def _opt_int(v: Any) -> int | None:
    f = num(v)
    return None if f is None else int(f)
