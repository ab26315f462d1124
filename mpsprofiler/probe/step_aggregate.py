"""How closed steps leave the probe: raw rows, packed, for the detail and for the aggregate.

Split from the step tracker (``probe/steps.py``), which decides *where* steps end and which
steps stay detailed; this module only says how a batch of closed steps is sent. Up to the
tracker's detail limit each step becomes one row of the ``steps`` event's columns; past it a
batch of steps becomes one exact aggregate (``events/step_agg.py``). Both are built by whoever
decodes the event (``events/step_rows.py``), from the rows packed here with C calls alone: the
probe's channel thread holds the GIL the training needs, so it does no Python a row.
"""

from __future__ import annotations

from typing import Any, cast

from ..events.payloads import StepsFields
from ..events.step_agg import ALLOC_EVERY, aggregate, aggregate_rows
from ..events.step_rows import ROW, columns, fold_columns, pack_rows

__all__ = ["ALLOC_EVERY", "ROW", "aggregate", "aggregate_rows", "columns", "fold_columns", "merge_fetch",
           "steps_payload"]


def steps_payload(rows: list[tuple[Any, ...]], origin: float, agg_rows: list[tuple[Any, ...]], mode: str,
                  optimizers: int | None = None, slowed: list[int] | None = None) -> StepsFields:
    """The ``steps`` event of the detailed rows and the rows past the detail, taken from the
    tracker (which no longer touches them: this runs on the channel thread, outside the
    tracker's lock); ``optimizers``: how many optimizers step in one step, sent where more
    than one. The rows go packed, with ``origin`` (see ``events/step_rows.py``): whoever
    decodes the event reads the columns (``STEP_COLUMNS`` and the others) as
    :func:`fold_columns` makes them, and ``agg`` as :func:`aggregate_rows` does. ``slowed``:
    the indices of ``agg_rows`` that a wake of the probe's channel overlapped (no chart peak)."""
    payload = cast(StepsFields, {"rows": pack_rows(rows), "origin": origin, "mode": mode})
    if optimizers is not None and optimizers > 1:
        payload["optimizers"] = optimizers
    if agg_rows:
        payload["agg_rows"] = pack_rows(agg_rows)
        if slowed:
            payload["agg_slowed"] = slowed
    return payload


def merge_fetch(a: list[Any], b: list[Any]) -> list[Any]:
    """Two fetches' [wait, cpu, runq, batches, idle] as one."""
    runq = None if a[2] is None and b[2] is None else (a[2] or 0.0) + (b[2] or 0.0)
    idle = b[4] if a[4] is None else (a[4] if b[4] is None else max(a[4], b[4]))
    return [a[0] + b[0], a[1] + b[1], runq, a[3] + b[3], idle]
