"""Op accounting (``session.ops.to_dict()``) as report tables.

The accounting comes from sampled steps only (see ``mpsprofiler.probe.ops``); it may be
absent (``--no-ops``), empty (too few steps) or from a newer version with keys this one
does not know: each case renders, the last as generic tables rather than hidden.
"""

from __future__ import annotations

from typing import Any

from ..session.session import Session
from ..units import fmt_pct
from .common import MAX_TABLE_ROWS, Table, cell_text, humanize


def ops_data(session: Session) -> dict[str, Any]:
    """``session.ops.to_dict()``, or {} when op accounting is absent, empty or broken."""
    ops = getattr(session, "ops", None)
    if ops is None or not hasattr(ops, "to_dict"):
        return {}
    try:
        data = ops.to_dict()
    except Exception:  # noqa: BLE001 - a view must render whatever the accounting did
        return {}
    if not isinstance(data, dict) or not any(_has_content(v) for v in data.values()):
        return {}
    return data


KNOWN_KEYS = {"sampled_steps", "first_step", "last_step", "device_kind", "model_device", "interval",
                  "overhead_share", "cost_s", "converged", "ops", "syncs", "float64", "bf16_complex", "mismatch", "mps_kernel",
                  "mps_predicted", "dropped"}
TOP_OPS = 15
CODE_COLUMNS = {"Op", "Code"}


def ops_headline(session: Session, data: dict[str, Any] | None = None) -> str:
    """One sentence on what op accounting covered (empty when it has no data);
    ``data``: :func:`ops_data` of ``session`` when the caller already has it."""
    data = ops_data(session) if data is None else data
    if not data:
        return ""
    n = data.get("sampled_steps") or 0
    text = f"{n} sampled step{'s' if n != 1 else ''}"
    if data.get("first_step") is not None and data.get("last_step") is not None:
        text += f" (steps {data['first_step']}–{data['last_step']}"
        text += f", then every {data['interval']} steps)" if data.get("interval") else ")"
    share = data.get("overhead_share")
    if isinstance(share, (int, float)):
        text += f"; sampling made those steps {fmt_pct(share)} slower"
    cost = data.get("cost_s")
    training = getattr(getattr(session, "steps", None), "total_dur", 0.0)
    if isinstance(cost, (int, float)) and isinstance(training, (int, float)) and training > 0:
        text += f"; op accounting cost {cost * 1e3:.0f} ms in all, {cost / training * 100:.2g}% of the training time"
        if data.get("converged"):
            text += " (the ops per step stopped changing, so sampling backed off)"
    mixed = data.get("bf16_complex") or {}
    if isinstance(mixed, dict) and (mixed.get("bfloat16") or mixed.get("complex")):
        text += f"; bfloat16 calls {mixed.get('bfloat16', 0)}, complex calls {mixed.get('complex', 0)}"
    if data.get("dropped"):
        text += f"; {data['dropped']} rows dropped at the cap"
    return text + "."


def ops_tables(session: Session, data: dict[str, Any] | None = None) -> list[Table]:
    """Op accounting (``session.ops.to_dict()``) as tables; keys this version does not
    know are shown generically rather than hidden. ``data``: :func:`ops_data` of
    ``session`` when the caller already has it."""
    data = ops_data(session) if data is None else data
    if not data:
        return []
    cwd = str(session.run.get("cwd") or "")
    where = lambda r: short_path(r.get("file"), cwd) + (f":{r['line']}" if r.get("line") else "")  # noqa: E731
    tables: list[Table] = []
    for key, title in (("mps_kernel", "Ops without an MPS kernel (they fall back to the CPU on a Mac)"),
                       ("mps_predicted", "Ops that would fall back to the CPU on a Mac (no MPS kernel in this torch)")):
        misses = _records(data.get(key))
        if misses:
            columns = [("Op", "op"), ("Module", "module"), ("Calls / step", "calls_per_step"), ("Where", where)]
            if any(m.get("evidence") for m in misses):
                columns.append(("Evidence", "evidence"))
            tables.append(_ops_table(title, misses, columns, numeric={2}))
    syncs = _records(data.get("syncs"))
    if syncs:
        tables.append(_ops_table("Host-device synchronisations", syncs,
                                 [("Kind", "kind"), ("Op", "op"), ("Where", where), ("Code", "code"),
                                  ("Calls / step", "calls_per_step"), ("Predicted", "predicted")], numeric={4}))
    f64 = data.get("float64")
    if not isinstance(f64, dict):
        f64 = {}
    sites = _records(f64.get("sites"))
    if sites:
        tables.append(_ops_table(f"float64 sites ({f64.get('calls', 0)} calls, {f64.get('per_step', 0)} per step)",
                                 sites, [("Where", where), ("Op", "op"), ("Module", "module"), ("Code", "code"),
                                         ("Calls", "calls")], numeric={4}))
    mismatches = _records(data.get("mismatch"))
    if mismatches:
        tables.append(_ops_table("Modules called with inputs on another device", mismatches,
                                 [("Module", "module"), ("Parameters on", "param_device"),
                                  ("Inputs on", "input_device"), ("Steps", "steps")], numeric={3}))
    ops = _records(data.get("ops"))
    if ops:
        tables.append(_ops_table(f"Top ops by host time (of {len(ops)})", ops,
                                 [("Op", "op"), ("Module", "module"), ("Calls / step", "calls_per_step"),
                                  ("Host ms / step", "host_ms_per_step"), ("Devices", "devices"),
                                  ("Dtypes", "dtypes"), ("Where", where)], numeric={2, 3}, limit=TOP_OPS))
    extra = {k: v for k, v in data.items() if k not in KNOWN_KEYS}
    tables += _generic_tables(extra)
    return tables


def short_path(path: Any, cwd: str = "") -> str:
    text = str(path or "")
    if cwd and text.startswith(cwd.rstrip("/") + "/"):
        return text[len(cwd.rstrip("/")) + 1:]
    return text


def _records(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _ops_table(title: str, records: list[dict[str, Any]], columns: list[tuple[str, Any]],
               numeric: set[int], limit: int = MAX_TABLE_ROWS) -> Table:
    rows = [[cell_text(get(r) if callable(get) else r.get(get)) for _, get in columns] for r in records[:limit]]
    note = f"{len(records) - limit} more not shown" if len(records) > limit else ""
    code = {i for i, (name, _) in enumerate(columns) if name in CODE_COLUMNS}
    return Table(title, [c for c, _ in columns], rows, note=note, numeric=numeric, code=code)


def _generic_tables(data: dict[str, Any]) -> list[Table]:
    tables: list[Table] = []
    scalars: list[list[str]] = []
    for key, value in data.items():
        title = humanize(key)
        if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
            value = [{"name": k, **v} for k, v in value.items()]
        records = _records(value)
        if records:
            columns: list[str] = []
            for rec in records[:MAX_TABLE_ROWS]:
                columns += [c for c in rec if c not in columns]
            tables.append(_ops_table(title, records, [(humanize(c), c) for c in columns], numeric=set()))
        elif _has_content(value):
            scalars.append([title, cell_text(value)])
    if scalars:
        tables.insert(0, Table("Other figures", ["Figure", "Value"], scalars))
    return tables


def _has_content(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value != 0
    if isinstance(value, (list, dict, str, tuple)):
        return len(value) > 0
    return value is not None
