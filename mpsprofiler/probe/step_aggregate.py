"""How closed steps are kept until the channel thread sends them: columns, then aggregates.

Split from the step tracker (``probe/steps.py``), which decides *where* steps end; this
module only says how a closed step is stored and sent. Up to the tracker's detail limit
each step is one row of the columns; past it a batch of steps is one exact aggregate
(count, sums, a log-bucket histogram) with one sample step and the batch's slowest step,
so a run of any length gives a bounded recording and the charts stay alive.
"""

from __future__ import annotations

from typing import Any, cast

from .. import events
from ..events.payloads import StepAggregate, StepsFields
from ..events.step_rows import ROW, columns, fold_columns, pack_rows

__all__ = ["ALLOC_EVERY", "ROW", "aggregate", "aggregate_rows", "columns", "fold_columns", "merge_fetch",
           "steps_payload"]

ALLOC_EVERY = 0.05
"""Seconds between readings of device-allocated memory at step ends (keeps its cost < 1%)."""


def aggregate(agg: dict[str, Any] | None, i: int, end: float, dur: float, wait: float, batches: int,
              wait_cpu: float, wait_runq: float | None, idle: int | None, alloc: int | None,
              pre: float | None, bwd: float | None) -> dict[str, Any]:
    """Add step ``i`` to the aggregate ``agg`` (None: start one); returns the aggregate."""
    if agg is None:
        agg = {
            "n": 0, "dur_sum": 0.0, "wait_sum": 0.0, "dur_min": dur, "dur_max": dur,
            "i_last": i, "hist": {}, "batches": 0, "wait_cpu_sum": 0.0, "wait_runq_sum": None,
            "idle_n": 0, "busy_n": 0,
        }
    agg["n"] += 1
    agg["dur_sum"] += dur
    agg["wait_sum"] += wait
    agg["batches"] += batches
    agg["wait_cpu_sum"] += wait_cpu
    if wait_runq is not None:
        agg["wait_runq_sum"] = (agg["wait_runq_sum"] or 0.0) + wait_runq
    if pre is not None and bwd is not None:
        # the steps whose backward passes were timed (all, or once steady one in
        # backward_sampling.EVERY): their own wait and duration go with their phases
        agg["phase_n"] = agg.get("phase_n", 0) + 1
        agg["pre_sum"] = agg.get("pre_sum", 0.0) + pre
        agg["bwd_sum"] = agg.get("bwd_sum", 0.0) + bwd
        agg["phase_wait_sum"] = agg.get("phase_wait_sum", 0.0) + wait
        agg["phase_dur_sum"] = agg.get("phase_dur_sum", 0.0) + dur
    if dur < agg["dur_min"]:
        agg["dur_min"] = dur
    step = [i, round(end, 6), dur, wait, batches, idle, alloc]  # STEP_COLUMNS order
    if dur > agg["dur_max"] or agg["n"] == 1:
        agg["dur_max"] = dur
        # the batch's slowest step goes along too: a pause or stall among fast steps
        # stays on the step charts (each point there is one real step)
        agg["peak"] = step
    if wait > 0 and idle is not None:
        agg["busy_n" if not idle else "idle_n"] += 1
    agg["i_last"] = i
    agg["end_last"] = step[1]
    b = events.bucket_of(dur)
    hist = agg["hist"]
    hist[b] = hist.get(b, 0) + 1
    # one sample step per batch keeps the charts alive on very long runs: the last
    # one, or the last one with a reading of device memory (the memory trends are
    # built from those) if that ended within 2 * ALLOC_EVERY of the last
    if alloc is not None or "alloc_at" not in agg or end - agg["alloc_at"] > 2 * ALLOC_EVERY:
        agg["sample"] = step
        if alloc is not None:
            agg["alloc_at"] = end
    return agg


def aggregate_rows(agg: dict[str, Any] | None, rows: list[tuple[Any, ...]],
                   origin: float = 0.0) -> dict[str, Any] | None:  # fmt: skip
    """Add ``rows`` (see :data:`ROW`) to the aggregate ``agg`` (None: start one); ``origin``
    as in :func:`fold_columns`. The same aggregate as :func:`aggregate` row by row, built
    with the running figures in local variables and the two sample steps made once per
    batch: this runs on the channel thread for every step of a long run of fast steps
    (~1.8 µs a step row by row), and on a one-core machine that time is the training's."""
    if not rows:
        return agg
    if agg is None:
        i, start, end, wait, batches, idle, alloc, wait_cpu, wait_runq, bwd_start, bwd = rows[0]
        pre = bwd_s = None
        if bwd_start is not None:
            pre, bwd_s = round(max(0.0, bwd_start - start), 7), round(bwd, 7)
        agg = aggregate(None, i, end - origin, end - start, wait, batches, wait_cpu, wait_runq, idle, alloc, pre,
                        bwd_s)
        rows = rows[1:]
        if not rows:
            return agg
    bucket_of = events.bucket_of
    hist = agg["hist"]
    n, dur_sum, wait_sum, batches_n = agg["n"], agg["dur_sum"], agg["wait_sum"], agg["batches"]
    cpu_sum, runq_sum, busy_n, idle_n = agg["wait_cpu_sum"], agg["wait_runq_sum"], agg["busy_n"], agg["idle_n"]
    phase_n, pre_sum, bwd_sum = agg.get("phase_n", 0), agg.get("pre_sum", 0.0), agg.get("bwd_sum", 0.0)
    phase_wait, phase_dur = agg.get("phase_wait_sum", 0.0), agg.get("phase_dur_sum", 0.0)
    dur_min, dur_max = agg["dur_min"], agg["dur_max"]
    alloc_at = agg.get("alloc_at")
    has_alloc_at = "alloc_at" in agg
    peak = sample = None  # (row, its duration) of this batch's slowest step and its sample step
    for row in rows:
        _, start, end, wait, batches, idle, alloc, wait_cpu, wait_runq, bwd_start, bwd = row
        dur = end - start
        n += 1
        dur_sum += dur
        wait_sum += wait
        batches_n += batches
        cpu_sum += wait_cpu
        if wait_runq is not None:
            runq_sum = (runq_sum or 0.0) + wait_runq
        if bwd_start is not None:
            phase_n += 1
            pre_sum += round(max(0.0, bwd_start - start), 7)
            bwd_sum += round(bwd, 7)
            phase_wait += wait
            phase_dur += dur
        if dur < dur_min:
            dur_min = dur
        if dur > dur_max:
            dur_max = dur
            peak = (row, dur)
        if wait > 0 and idle is not None:
            if idle:
                idle_n += 1
            else:
                busy_n += 1
        b = bucket_of(dur)
        hist[b] = hist.get(b, 0) + 1
        if alloc is not None or not has_alloc_at or end - origin - alloc_at > 2 * ALLOC_EVERY:
            sample = (row, dur)
            if alloc is not None:
                alloc_at, has_alloc_at = end - origin, True
    agg.update(n=n, dur_sum=dur_sum, wait_sum=wait_sum, batches=batches_n, wait_cpu_sum=cpu_sum,
               wait_runq_sum=runq_sum)
    if phase_n:
        agg.update(phase_n=phase_n, pre_sum=pre_sum, bwd_sum=bwd_sum, phase_wait_sum=phase_wait,
                   phase_dur_sum=phase_dur)
    agg.update(dur_min=dur_min, dur_max=dur_max)
    if peak is not None:
        agg["peak"] = _step(peak, origin)
    agg.update(idle_n=idle_n, busy_n=busy_n, i_last=rows[-1][0], end_last=round(rows[-1][2] - origin, 6))
    if sample is not None:
        agg["sample"] = _step(sample, origin)
    if has_alloc_at:
        agg["alloc_at"] = alloc_at
    return agg


def _step(row_dur: tuple[tuple[Any, ...], float], origin: float) -> list[Any]:
    """A row as the aggregate's sample step (STEP_COLUMNS order, as :func:`aggregate` makes it)."""
    row, dur = row_dur
    return [row[0], round(row[2] - origin, 6), dur, row[3], row[4], row[5], row[6]]


def steps_payload(rows: list[tuple[Any, ...]], origin: float, agg: dict[str, Any] | None, mode: str,
                  optimizers: int | None = None) -> StepsFields:
    """The ``steps`` event of the detailed rows and the aggregate taken from the tracker
    (which no longer touches them: this runs on the channel thread, outside the tracker's
    lock); ``optimizers``: how many optimizers step in one step, sent where more than one.
    The rows go packed, with ``origin`` (see ``events/step_rows.py``): whoever decodes the
    event reads the columns (``STEP_COLUMNS`` and the others), as :func:`fold_columns`
    makes them."""
    payload = cast(StepsFields, {"rows": pack_rows(rows), "origin": origin, "mode": mode})
    if optimizers is not None and optimizers > 1:
        payload["optimizers"] = optimizers
    if agg is not None:
        agg.pop("alloc_at", None)
        peak, sample = agg.get("peak"), agg.get("sample")
        if peak is not None and sample is not None and peak[0] == sample[0]:
            del agg["peak"]  # the sample is the slowest step
        agg["hist"] = {str(k): v for k, v in agg["hist"].items()}
        payload["agg"] = cast(StepAggregate, agg)
    return payload


def merge_fetch(a: list[Any], b: list[Any]) -> list[Any]:
    """Two fetches' [wait, cpu, runq, batches, idle] as one."""
    runq = None if a[2] is None and b[2] is None else (a[2] or 0.0) + (b[2] or 0.0)
    idle = b[4] if a[4] is None else (a[4] if b[4] is None else max(a[4], b[4]))
    return [a[0] + b[0], a[1] + b[1], runq, a[3] + b[3], idle]
