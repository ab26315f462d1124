"""Packed step rows (events/step_rows.py): what the reader folds is what the probe used to send."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest

from mpsprofiler import events
from mpsprofiler.events import step_rows
from mpsprofiler.events.step_agg import aggregate_rows, finish
from mpsprofiler.probe.step_aggregate import steps_payload


def test_the_columns_are_the_steps_event_s_columns_in_order() -> None:
    assert step_rows.COLUMNS == (*events.STEP_COLUMNS, *events.STEP_LOADER_COLUMNS, *events.STEP_PHASE_COLUMNS)
    assert tuple(step_rows.columns()) == step_rows.COLUMNS


def _rows(n: int, seed: int, *, runq: bool = True, phases: str = "some", device: bool = True) -> list[tuple[Any, ...]]:
    """Rows as the tracker closes them: a perf_counter-like clock far from 0 (its digits
    are what the rounding must get right), one step in 7 with its backward phases."""
    rng = random.Random(seed)
    t = 81234.567 + rng.random()
    rows = []
    for i in range(n):
        start = t
        wait = rng.random() * 3e-4
        end = start + 8e-4 + rng.random() * 1e-4
        timed = phases == "all" or (phases == "some" and i % 7 == 3)
        bwd_start = start + wait + 2e-4 if timed else None
        idle, alloc = (rng.choice((None, 0, 1)), rng.choice((None, 1 << 33))) if device else (None, None)
        rows.append((i, start, end, wait, rng.choice((1, 1, 2)), idle, alloc, wait * 0.9,
                     (rng.random() * 1e-6 if runq else None),
                     bwd_start, 3e-4 if timed else None))
        t = end
    return rows


def _old_line(rows: list[tuple[Any, ...]], origin: float, ts: float, **rest: Any) -> bytes:
    """The line the probe wrote before it packed rows: its columns folded in the process."""
    cols = step_rows.columns()
    step_rows.fold_columns(cols, rows, origin)
    return events.encode(events.KIND_STEPS, ts, **cols, **rest)


@pytest.mark.parametrize("runq, phases, device", [(True, "some", True), (False, "none", False), (True, "all", True),
                                                (True, "some", False)])
def test_the_recorded_line_is_the_one_the_probe_wrote_before(runq: bool, phases: str, device: bool) -> None:
    """An accelerator's idle and allocated columns, a CPU run's (all None), with and without
    the run-queue readings and the backward phases; the detail and the aggregate."""
    rows = _rows(900, 1, runq=runq, phases=phases, device=device)
    detailed, past = rows[:600], rows[600:]  # the detail's end in this event: the rest aggregated
    origin = 81000.25
    payload = steps_payload(detailed, origin, past, "optimizer", 2)
    wire = events.encode(events.KIND_STEPS, 12.5, **payload, restart=True, r=1)
    event, recorded = events.decode_wire(wire.rstrip(b"\n"))
    agg = aggregate_rows(None, past, origin)  # as the probe folded them before it packed rows
    assert agg is not None
    old = _old_line(detailed, origin, 12.5, mode="optimizer", optimizers=2, agg=finish(agg), restart=True, r=1)
    assert recorded + b"\n" == old
    assert event.data == json.loads(old)
    assert not {"rows", "origin", "agg_rows"} & set(event.data)
    assert events.decode(wire).data == event.data  # a recording or spill holding a packed line reads the same


def test_an_event_without_detailed_steps_has_empty_columns() -> None:
    payload = steps_payload([], 5.0, [], "optimizer")
    event = events.decode(events.encode(events.KIND_STEPS, 1.0, **payload))
    assert event.data == {"k": "steps", "ts": 1.0, **step_rows.columns(), "mode": "optimizer"}


def test_lines_that_the_probe_did_not_pack_are_recorded_as_received() -> None:
    line = _old_line(_rows(5, 2), 0.0, 3.0, mode="optimizer").rstrip(b"\n")
    event, recorded = events.decode_wire(line)
    assert recorded is line and event.data["i"] == [0, 1, 2, 3, 4]


def _packed(n: int = 4) -> dict[str, Any]:
    return step_rows.pack_rows(_rows(n, 3, phases="all"))


@pytest.mark.parametrize("damage", [
    lambda p: p.update(n=5),  # more rows than the columns hold
    lambda p: p.update(n=-1),
    lambda p: p.update(n=True),
    lambda p: p.update(end="@@not base64@@"),
    lambda p: p.update(end=p["end"][:-4]),  # a value short
    lambda p: p.update(wait=12),
    lambda p: p.update(i=[0, 1, 2]),
    lambda p: p.update(bwd=step_rows._b64(step_rows.array("d", [math.inf] * 4))),
    lambda p: p.update(start=step_rows._b64(step_rows.array("d", [math.nan] * 4))),
    lambda p: p.pop("start"),
])
def test_damaged_packed_rows_are_no_event(damage: Any) -> None:
    packed = _packed()
    damage(packed)
    line = json.dumps({"k": "steps", "ts": 1.0, "rows": packed, "origin": 0.0, "mode": "optimizer"})
    with pytest.raises(ValueError):
        events.decode(line)
    assert list(events.decode_lines([line])) == []  # a tolerant read skips it


def test_damaged_or_empty_aggregate_rows_are_no_event() -> None:
    for agg_rows in ({"n": 0}, {"n": 2, "end": "AAAA"}, "x"):
        line = json.dumps({"k": "steps", "ts": 1.0, "rows": {"n": 0}, "origin": 0.0, "mode": "optimizer",
                           "agg_rows": agg_rows})
        with pytest.raises(ValueError):
            events.decode(line)


def test_a_damaged_origin_is_no_event() -> None:
    line = json.dumps({"k": "steps", "ts": 1.0, "rows": _packed(), "origin": "x", "mode": "optimizer"})
    with pytest.raises(ValueError):
        events.decode(line)


def test_packing_is_c_calls_where_no_column_mixes_floats_and_none() -> None:
    """The point of packing: the probe's part is a fixed number of calls, not one a value."""
    import sys

    rows = _rows(2000, 4, phases="none")
    calls = 0

    def count(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    sys.setprofile(count)
    try:
        step_rows.pack_rows(rows)
    finally:
        sys.setprofile(None)
    assert calls < 80  # 11 columns of a few calls each, whatever the row count


def test_a_step_the_probe_s_wake_slowed_is_no_chart_peak() -> None:
    """Past the detail the chart draws each batch's slowest step: of a fast loop, nearly
    always the one a wake of the probe's channel slowed. A step the probe marks as such is
    passed over for the peak (a pause of the script's own stays one); the figures keep it."""
    rows = _rows(300, 5, phases="none", device=False)
    dur = [r[2] - r[1] for r in rows]
    i_wake, i_pause = 40, 200
    rows[i_wake] = (*rows[i_wake][:2], rows[i_wake][1] + 0.003, *rows[i_wake][3:])  # 3 ms: the wake's step
    rows[i_pause] = (*rows[i_pause][:2], rows[i_pause][1] + 0.002, *rows[i_pause][3:])  # 2 ms: a pause
    origin = 81000.0
    got = events.decode(events.encode(events.KIND_STEPS, 1.0, **steps_payload([], origin, rows, "optimizer",
                                                                              None, [i_wake]))).data
    assert "agg_slowed" not in got
    agg = got["agg"]
    assert agg["peak"][0] == rows[i_pause][0]  # the script's own pause is the peak
    assert agg["dur_max"] == pytest.approx(0.003)  # the figures still hold the wake's step
    unmarked = events.decode(events.encode(events.KIND_STEPS, 1.0,
                                           **steps_payload([], origin, rows, "optimizer"))).data["agg"]
    assert unmarked["peak"][0] == rows[i_wake][0]  # (without the mark it was the peak)
    assert max(dur) < 0.002
    only = events.decode(events.encode(events.KIND_STEPS, 1.0, **steps_payload(
        [], origin, rows[:1], "optimizer", None, [0]))).data["agg"]
    assert "peak" not in only and only["n"] == 1  # every step marked: no peak, the sample stays
