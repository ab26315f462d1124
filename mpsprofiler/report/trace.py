"""Chrome trace-event JSON: open the run in Perfetto (ui.perfetto.dev) or chrome://tracing.

Timestamps are microseconds on the probe's clock (0 = probe start). Steps are complete
("X") events with their DataLoader wait nested at the start (the probe times the wait
as the first part of each step); memory samples are counters ("C"); warnings, the crash
and the exit are instant events ("i"); op accounting rides along as one event's args.
The session's series are already thinned for long runs, so the trace stays bounded.
"""

from __future__ import annotations

import json
import math
from typing import Any

from .. import __version__
from ..events import json_safe
from ..results import Results
from ..session.session import Session
from ..units import finite
from . import common, ops_tables

TID_STEPS = 1
TID_EVENTS = 2
TID_OPS = 3
MIB = 1024 * 1024


def _us(seconds: Any) -> float:
    """Microseconds for the trace; a damaged time (not a number) is put at 0."""
    value = finite(seconds)
    return round(max(0.0, min(value, 1e12)) * 1e6, 1) if value is not None else 0.0


class TraceRenderer:
    name = "trace"
    extension = ".trace.json"

    def render(self, session: Session, results: Results) -> str:
        doc = {
            "traceEvents": trace_events(session, results),
            "displayTimeUnit": "ms",
            "otherData": {"generator": common.footer_text(), "script": session.script,
                          "status": session.status, "version": __version__},
        }
        return json.dumps(json_safe(doc), ensure_ascii=False, allow_nan=False, default=str) + "\n"


def trace_events(session: Session, results: Results) -> list[dict[str, Any]]:
    pid = _pid(session)
    out: list[dict[str, Any]] = [
        _meta(pid, 0, "process_name", {"name": f"mpsprof: {session.script}"}),
        _meta(pid, TID_STEPS, "thread_name", {"name": "training steps"}),
        _meta(pid, TID_EVENTS, "thread_name", {"name": "warnings / crash / exit"}),
        _meta(pid, TID_STEPS, "thread_sort_index", {"sort_index": 0}),
        _meta(pid, TID_EVENTS, "thread_sort_index", {"sort_index": 1}),
    ]
    out += _steps(session, pid)
    out += _memory(session, pid)
    out += _instants(session, results, pid)
    ops = _ops(session, pid)
    if ops:
        out.append(_meta(pid, TID_OPS, "thread_name", {"name": "op accounting (sampled)"}))
        out += ops
    return out


def _pid(session: Session) -> int:
    try:
        return int(session.hello.get("pid") or 1)
    except (TypeError, ValueError):
        return 1


def _meta(pid: int, tid: int, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "ts": 0, "args": args}


def _steps(session: Session, pid: int) -> list[dict[str, Any]]:
    out = []
    warmup = session.steps.warmup
    for p in session.steps.series.points():
        if not (math.isfinite(p.end) and math.isfinite(p.dur)) or p.dur < 0:
            continue
        start = max(0.0, p.end - p.dur)
        args: dict[str, Any] = {"step": p.i, "data_wait_ms": round(p.wait * 1e3, 3), "batches": p.batches}
        if p.alloc is not None:
            args["device_allocated_mib"] = round(p.alloc / MIB, 1)
        if p.idle is not None:
            args["device_idle_while_waiting"] = bool(p.idle)
        out.append({"ph": "X", "name": "warm-up step" if p.i < warmup else "step", "cat": "step",
                    "pid": pid, "tid": TID_STEPS, "ts": _us(start), "dur": _us(p.dur), "args": args})
        wait = min(max(p.wait, 0.0), p.dur)
        if wait > 0:
            out.append({"ph": "X", "name": "data wait", "cat": "dataloader", "pid": pid, "tid": TID_STEPS,
                        "ts": _us(start), "dur": _us(wait), "args": {"step": p.i}})
    return out


def _memory(session: Session, pid: int) -> list[dict[str, Any]]:
    out = []
    for m in session.memory.series.points():
        ts = _us(m.ts)
        host = {}
        if m.rss is not None:
            host["rss"] = round(m.rss / MIB, 1)
        if m.rss_children:
            host["workers"] = round(m.rss_children / MIB, 1)
        if host:
            out.append(_counter(pid, "host memory (MiB)", ts, host))
        device = {}
        if m.allocated is not None:
            device["allocated"] = round(m.allocated / MIB, 1)
        if m.cached is not None:
            device["cache"] = round(max(0, m.cached - (m.allocated or 0)) / MIB, 1)
        if device:
            out.append(_counter(pid, "device memory (MiB)", ts, device))
        if m.sys_available is not None:
            out.append(_counter(pid, "system available (MiB)", ts, {"available": round(m.sys_available / MIB, 1)}))
        if m.cpu_pct is not None:
            out.append(_counter(pid, "CPU (%)", ts, {"cpu": round(m.cpu_pct, 1)}))
    return out


def _counter(pid: int, name: str, ts: float, args: dict[str, float]) -> dict[str, Any]:
    return {"ph": "C", "name": name, "pid": pid, "tid": 0, "ts": ts, "args": args}


def _instant(pid: int, name: str, ts: float, args: dict[str, Any], cat: str) -> dict[str, Any]:
    return {"ph": "i", "s": "p", "name": name, "cat": cat, "pid": pid, "tid": TID_EVENTS, "ts": _us(ts), "args": args}


def _instants(session: Session, results: Results, pid: int) -> list[dict[str, Any]]:
    out = []
    for w in session.warnings.values():
        out.append(_instant(pid, f"{w.category}", w.first_ts, {
            "message": common.clip(w.message, 2000), "where": f"{w.filename}:{w.lineno}", "count": w.count,
        }, "warning"))
    crash = session.crash
    if crash is not None:
        out.append(_instant(pid, f"crash: {crash.type}", crash.ts, {
            "message": common.clip(crash.message, 4000), "where": crash.user_frame or {},
        }, "crash"))
    if session.exit is not None:
        end = session.exit.duration if session.exit.duration is not None else session.last_ts
        out.append(_instant(pid, "exit", end, {"status": session.status, "returncode": session.exit.returncode,
                                               "signal": session.exit.signal_name}, "exit"))
    findings = common.finding_dicts(results)
    if findings:
        # findings have no time of their own: one marker at the end of the run lists them
        out.append(_instant(pid, f"{len(findings)} finding(s)", session.last_ts, {
            f"{i + 1}. {f.get('severity')}": f"{f.get('title')} ({f.get('rule')})" for i, f in enumerate(findings)
        }, "finding"))
    return out


def _ops(session: Session, pid: int) -> list[dict[str, Any]]:
    """Op accounting as one event spanning the run, its tables in args (bounded)."""
    data = ops_tables.ops_data(session)
    if not data:
        return []
    args = {}
    for table in ops_tables.ops_tables(session, data):
        args[table.title] = [dict(zip(table.columns, row, strict=False)) for row in table.rows]
    end = session.steps.last_end or session.last_ts
    start = session.steps.first_end or 0.0
    return [{"ph": "X", "name": "op accounting", "cat": "ops", "pid": pid, "tid": TID_OPS,
             "ts": _us(start), "dur": _us(max(0.0, end - start)), "args": args}]
