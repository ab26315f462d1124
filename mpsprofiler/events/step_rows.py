"""Closed steps on the wire: raw rows packed by the probe, folded into columns by the reader.

A ``steps`` event's columns (``STEP_COLUMNS`` and the others) are rounded figures, one
list per column. Building them takes a Python operation per value (a subtraction and a
``round`` for each of ~8 columns), and encoding them a float repr per value: ~2.6 µs a
step, on the probe's channel thread, which holds the GIL the training needs for it
(benchmarks/RESULTS.md, session 58: 1.6 ms of a wake's 2.5 ms at 600 steps a wake).

So the probe sends the rows as it keeps them (:data:`ROW`, unrounded) in a packed form
made by C calls alone (:func:`pack_rows`: one ``array`` and one base64 string a float
column), and the reader (the launcher's event reader, any :func:`~mpsprofiler.events.decode`)
folds them into exactly the columns the probe used to send (:func:`fold_columns`, the same
arithmetic on the same doubles): the recording, the session and every view see the
``steps`` event they always did. The packed form lives only on the pipe between the
probe and its launcher (and in its spill files); a recording holds the folded one.
"""

from __future__ import annotations

import binascii
import math
import sys
from array import array
from typing import Any

from .step_agg import aggregate_rows, finish, peak_besides

ROW = ("i", "start", "end", "wait", "batches", "idle", "alloc", "wait_cpu", "wait_runq", "bwd_start", "bwd")
"""A closed step as the training thread leaves it: one tuple, unrounded (rounding and
columns are the reader's, see :func:`fold_columns`)."""

_FLOATS = frozenset({"start", "end", "wait", "wait_cpu"})
"""Always a float: one packed array each."""
_FLOATS_OR_NONE = frozenset({"wait_runq", "bwd_start", "bwd"})
"""A float or None: None where every row has None, else packed with NaN for None (these
are clock readings and sums of them, never NaN themselves)."""
_INTS = frozenset({"i", "batches"})
"""Always an int (an index, a count): one packed array of 64-bit ints each."""
# the others (idle, alloc: an int or None) go as None where every row has None (a CPU run),
# else as JSON lists

MAX_ROWS = 1 << 22
"""More rows than a packed event can hold: a damaged line, not a probe's (the probe sends
its closed steps at every channel wake, a few thousand at most)."""

_SWAP = sys.byteorder != "little"
"""The packed arrays are little-endian whatever the machine (a spill file is read back by
the same machine's launcher, but a wire format names its byte order)."""

_NAN = math.nan


def pack_rows(rows: list[tuple[Any, ...]]) -> dict[str, Any]:
    """``rows`` (:data:`ROW` tuples) as a JSON-ready dict: ``n`` and one entry a column.

    C calls only, but for a float-or-None column that has both (the backward phases of
    the one step in 7 that times them): a list comprehension over that column."""
    packed: dict[str, Any] = {"n": len(rows)}
    if not rows:
        return packed
    for name, col in zip(ROW, zip(*rows, strict=True), strict=True):
        if name in _FLOATS:
            packed[name] = _b64(array("d", col))
        elif name in _FLOATS_OR_NONE:
            nones = col.count(None)
            if nones == len(col):
                packed[name] = None
            else:
                packed[name] = _b64(array("d", [_NAN if x is None else x for x in col] if nones else col))
        elif name in _INTS:
            packed[name] = _b64(array("q", col))
        else:
            packed[name] = None if col.count(None) == len(col) else list(col)
    return packed


def unpack_rows(packed: Any) -> list[tuple[Any, ...]]:
    """The rows of :func:`pack_rows`; raises ValueError for anything it did not make."""
    if not isinstance(packed, dict):
        raise ValueError("packed steps are not an object")
    n = packed.get("n")
    if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= MAX_ROWS:
        raise ValueError("packed steps have no row count")
    if not n:
        return []
    cols: list[list[Any]] = []
    for name in ROW:
        value = packed.get(name)
        if name in _FLOATS or (name in _FLOATS_OR_NONE and value is not None):
            col: list[Any] = _values(value, n, "d")
            if name in _FLOATS_OR_NONE:
                col = [None if x != x else x for x in col]  # NaN: None (see pack_rows)
                finite = [x for x in col if x is not None]
            else:
                finite = col
            if not all(map(math.isfinite, finite)):
                raise ValueError(f"packed steps: column {name} holds a number the probe never sends")
        elif name in _FLOATS_OR_NONE or value is None and name not in _INTS:
            col = [None] * n
        elif name in _INTS:
            col = _values(value, n, "q")
        else:
            if not isinstance(value, list) or len(value) != n:
                raise ValueError(f"packed steps: column {name} has no {n} values")
            col = value
        cols.append(col)
    return list(zip(*cols, strict=True))


COLUMNS = ("i", "end", "dur", "wait", "batches", "idle", "alloc", "wait_cpu", "wait_runq", "pre", "bwd")
"""The ``steps`` event's columns in the order it carries them: ``STEP_COLUMNS``,
``STEP_LOADER_COLUMNS``, ``STEP_PHASE_COLUMNS`` (named in the package, which imports this
module: tests/unit/test_step_rows.py holds the two together)."""


def columns() -> dict[str, list[Any]]:
    """Empty step columns: one list per name of the ``steps`` event's columns."""
    return {name: [] for name in COLUMNS}


def fold_columns(cols: dict[str, list[Any]], rows: list[tuple[Any, ...]], origin: float = 0.0) -> None:
    """Append ``rows`` to the columns, rounded as sent; ``origin``: the probe clock's
    reading at its start, taken off the times (durations need none)."""
    if not rows:
        return
    i, start, end, wait, batches, idle, alloc, wait_cpu, wait_runq, bwd_start, bwd = zip(*rows, strict=True)
    cols["i"].extend(i)
    cols["end"].extend([round(e - origin, 6) for e in end])
    cols["dur"].extend([round(e - s, 7) for s, e in zip(start, end, strict=True)])
    cols["wait"].extend([round(w, 7) for w in wait])
    cols["batches"].extend(batches)
    cols["idle"].extend(idle)
    cols["alloc"].extend(alloc)
    cols["wait_cpu"].extend([round(c, 7) for c in wait_cpu])
    cols["wait_runq"].extend([None if q is None else round(q, 7) for q in wait_runq])
    cols["pre"].extend([None if b is None else round(max(0.0, b - s), 7) for s, b in zip(start, bwd_start, strict=True)])
    cols["bwd"].extend([None if b is None else round(t, 7) for b, t in zip(bwd_start, bwd, strict=True)])


def unfold(record: dict[str, Any]) -> dict[str, Any]:
    """A decoded ``steps`` record with packed ``rows`` (and their ``origin``) as the record
    with the columns in their place, and packed ``agg_rows`` as their aggregate ``agg``
    (``events/step_agg.py``), keys in the order the probe used to write them (so the
    recorded line is the one it wrote before rows were packed)."""
    origin = record.get("origin", 0.0)
    if not isinstance(origin, (int, float)) or isinstance(origin, bool):
        raise ValueError("packed steps have no origin")
    origin = float(origin)
    cols = columns()
    fold_columns(cols, unpack_rows(record["rows"]), origin)
    out: dict[str, Any] = {}
    for key, value in record.items():
        if key == "rows":
            out.update(cols)
        elif key == "agg_rows":
            agg_rows = unpack_rows(value)
            agg = aggregate_rows(None, agg_rows, origin)
            if agg is None:
                raise ValueError("packed steps: an aggregate of no steps")
            slowed = record.get("agg_slowed")
            if slowed:
                if not isinstance(slowed, list) or not all(isinstance(k, int) for k in slowed):
                    raise ValueError("packed steps: the slowed steps are no indices")
                peak_besides(agg, agg_rows, origin, set(slowed))
            out["agg"] = finish(agg)
        elif key not in ("origin", "agg_slowed"):
            out[key] = value
    return out


def _b64(values: array) -> str:  # type: ignore[type-arg]
    if _SWAP:
        values.byteswap()
    return binascii.b2a_base64(values.tobytes(), newline=False).decode("ascii")


def _raw(text: Any, size: int) -> bytes:
    """The bytes of one packed column, ``size`` of them; ValueError for anything else."""
    if not isinstance(text, str):
        raise ValueError("packed steps: a column is not a string")
    try:
        raw = binascii.a2b_base64(text)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"packed steps: {exc}") from None
    if len(raw) != size:
        raise ValueError(f"packed steps: a column has no {size // 8} values")
    return raw


def _values(text: Any, n: int, code: str) -> list[Any]:
    """The ``n`` values of one packed column of array type ``code`` ("d" floats, "q" ints)."""
    values = array(code)
    values.frombytes(_raw(text, 8 * n))
    if _SWAP:
        values.byteswap()
    return values.tolist()


def as_read(fields: dict[str, Any]) -> dict[str, Any]:
    """A ``steps`` event's fields as its reader gets them (the columns; see :func:`unfold`),
    for code that takes the probe's events without the wire (tests, benchmarks)."""
    return unfold(fields) if "rows" in fields else fields
