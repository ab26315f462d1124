"""The batched aggregate of closed steps (``step_aggregate.aggregate_rows``) equals the
row-by-row one (``aggregate``), figure for figure, whatever the batches' sizes and contents.

Why: ``aggregate_rows`` keeps its running figures in local variables (it runs on the channel
thread for every step of a long run of fast steps, issue 34); a sum taken in another order,
a peak or sample step picked differently, would change what the session reads."""

from __future__ import annotations

import random
from typing import Any

from mpsprofiler.events.step_agg import finish
from mpsprofiler.events.step_rows import as_read
from mpsprofiler.probe.step_aggregate import aggregate, aggregate_rows, steps_payload


def _rows(rng: random.Random, n: int, t0: float) -> list[tuple[Any, ...]]:
    rows, t = [], t0
    for i in range(n):
        start = t
        t += rng.choice([1e-8, rng.uniform(1e-4, 5e-4), rng.uniform(1e-3, 0.2)])  # a tiny step, fast, slow
        wait = rng.choice([0.0, rng.uniform(0.0, 1e-4)])
        bwd_start = None if rng.random() < 0.3 else start + rng.uniform(-1e-6, 1e-4)
        rows.append((i, start, t, wait, rng.choice([0, 1, 2]), rng.choice([None, 0, 1]),
                     rng.choice([None, None, None, rng.randrange(1 << 30)]), wait * rng.random(),
                     rng.choice([None, rng.uniform(0.0, 1e-5)]), bwd_start, rng.uniform(0.0, 1e-4)))
    return rows


def _one_by_one(rows: list[tuple[Any, ...]], origin: float) -> dict[str, Any] | None:
    agg = None
    for i, start, end, wait, batches, idle, alloc, wait_cpu, wait_runq, bwd_start, bwd in rows:
        pre = bwd_s = None
        if bwd_start is not None:
            pre, bwd_s = round(max(0.0, bwd_start - start), 7), round(bwd, 7)
        agg = aggregate(agg, i, end - origin, end - start, wait, batches, wait_cpu, wait_runq, idle, alloc, pre,
                        bwd_s)
    return agg


def test_batched_aggregate_equals_row_by_row() -> None:
    for seed in range(40):
        rng = random.Random(seed)
        origin = rng.choice([0.0, 12345.678901])
        rows = _rows(rng, rng.randrange(1, 400), origin + rng.uniform(0.0, 50.0))
        want = _one_by_one(rows, origin)
        got: dict[str, Any] | None = None
        k = 0
        while k < len(rows):  # the channel thread's batches: any sizes, the first one alone too
            size = rng.choice([1, 2, rng.randrange(1, 200)])
            got = aggregate_rows(got, rows[k:k + size], origin)
            k += size
        assert got == want, seed
        assert got is not None and want is not None
        assert finish(dict(got)) == finish(dict(want))
        # and the reader's aggregate of all the rows at once (events/step_rows.py: the probe
        # sends the rows past the detail packed) is the probe's batched one, sent as it was
        assert as_read(steps_payload([], origin, rows, "optimizer"))["agg"] == finish(got)


def test_no_rows_leave_the_aggregate_as_it_was() -> None:
    assert aggregate_rows(None, []) is None
    rows = _rows(random.Random(1), 5, 3.0)
    agg = aggregate_rows(None, rows)
    assert agg is not None
    before = dict(agg)
    assert aggregate_rows(agg, []) == before


def test_an_aggregates_sampled_phases_are_their_own_steps() -> None:
    """Once steady only one step in a few has its backward pass timed
    (probe/backward_sampling.py): an aggregate's phases are those steps' own (their wait
    and duration with them), not dropped because the other steps have none."""
    from mpsprofiler.session.steps import StepStats

    rows, t = [], 0.0
    for i in range(140):
        start = t
        sampled = i % 7 == 3
        t += 0.010 if sampled else 0.020  # the timed steps are not the average step
        rows.append((i, start, t, 0.001, 1, None, None, 0.001, None, start + 0.004 if sampled else None,
                     0.003 if sampled else 0.0))
    agg = aggregate_rows(None, rows)
    assert agg is not None and agg["phase_n"] == 20 and agg["n"] == 140
    stats = StepStats()
    stats.feed(as_read(steps_payload([], 0.0, rows, "optimizer")))
    phases = stats.phase_means()
    assert phases is not None and phases["steps"] == 20
    assert abs(phases["data"] - 0.001) < 1e-9 and abs(phases["own"] - 0.003) < 1e-9
    assert abs(phases["backward"] - 0.003) < 1e-9 and abs(phases["after"] - 0.003) < 1e-9
