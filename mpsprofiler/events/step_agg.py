"""Exact aggregates of closed steps: what a ``steps`` event carries past the detail (``agg``).

Past the step tracker's detail (long runs, runs of very fast steps) a batch of steps is one
exact aggregate: count, sums, a log-bucket histogram, with one sample step and the batch's
slowest step, so a run of any length gives a bounded recording and the charts stay alive.
The probe sends those steps' raw rows packed (``events/step_rows.py``); whoever decodes the
event builds the aggregate here, off the training process (a Python loop a row: ~1 µs a step
that the probe's channel thread, holding the GIL the training needs, used to pay).
"""

from __future__ import annotations

from typing import Any

from .buckets import bucket_of

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
    b = bucket_of(dur)
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
    """Add ``rows`` (``events/step_rows.py``'s ``ROW`` tuples) to the aggregate ``agg`` (None:
    start one); ``origin`` as in that module's ``fold_columns``. The same aggregate as :func:`aggregate` row by row, built
    with the running figures in local variables and the two sample steps made once per
    batch: this runs for every step of a long run of fast steps (~1.8 µs a step row by
    row), in the reader of the probe's events (``events/step_rows.py``)."""
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


def peak_besides(agg: dict[str, Any], rows: list[tuple[Any, ...]], origin: float, slowed: set[int]) -> None:
    """Make ``agg``'s chart peak (the slowest step of the batch, :func:`aggregate_rows`) the
    slowest of ``rows`` but those at the indices ``slowed`` (steps a wake of the probe's own
    channel overlapped: past the detail of a fast loop, the slowest step of nearly every batch
    was the one a wake slowed, and the step chart drew those: ~2-3 ms bars among 60 µs
    steps); none where every row is one. The aggregate's figures (``dur_max`` too) keep them."""
    best: tuple[tuple[Any, ...], float] | None = None
    for k, row in enumerate(rows):
        if k in slowed:
            continue
        dur = row[2] - row[1]
        if best is None or dur > best[1]:
            best = (row, dur)
    if best is None:
        agg.pop("peak", None)
    else:
        agg["peak"] = _step(best, origin)


def finish(agg: dict[str, Any]) -> dict[str, Any]:
    """The aggregate as a ``steps`` event carries it (``StepAggregate``): its bookkeeping
    (``alloc_at``) off, the slowest step dropped where it is the sample step, the histogram's
    buckets as strings (JSON's keys)."""
    agg.pop("alloc_at", None)
    peak, sample = agg.get("peak"), agg.get("sample")
    if peak is not None and sample is not None and peak[0] == sample[0]:
        del agg["peak"]  # the sample is the slowest step
    agg["hist"] = {str(k): v for k, v in agg["hist"].items()}
    return agg
