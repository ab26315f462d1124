"""The run's summary figures: ``summary.json``, the headless report, the JSON export.

Built as the typed :class:`~.documents.Summary` (the views' type, re-exported by
:mod:`mpsprofiler.results`), so mypy checks every key and value here against what the
views read.
"""

from __future__ import annotations

from .documents import AppliedDoc, ChangesDoc, RankRow, RecordingDoc, SkippedDoc, Summary
from .session import Session
from .warmup import between, framework_warmup, warmup_cost

SUMMARY_SCHEMA = 1


def summarize(session: Session) -> Summary:
    steps = session.steps
    mem = session.memory
    exit_info = session.exit
    wall = None
    if steps.first_end is not None and steps.last_end is not None:
        wall = steps.last_end - steps.first_end
    med = steps.quantile(0.5)
    p90 = steps.quantile(0.9)
    apart, apart_sampled = between(session)
    summary: Summary = {
        "schema": SUMMARY_SCHEMA,
        "script": session.script,
        "argv": session.run.get("argv"),
        "cwd": session.run.get("cwd"),
        "run_dir": session.run.get("run_dir"),
        "started": session.run.get("started"),
        "status": session.status,
        "exit": None
        if exit_info is None
        else {
            "returncode": exit_info.returncode,
            "signal": exit_info.signal_name,
            "stopped_by_user": exit_info.stopped_by_user,
        },
        "duration_s": exit_info.duration if exit_info else session.last_ts,
        "device": {
            "kind": session.device_kind,
            "name": session.model.get("device_name") or session.env.get("chip"),
            "model_device": session.model.get("device"),
            "parameters": session.model.get("parameters"),
        },
        "steps": {
            "count": steps.count,
            "mode": steps.mode,
            "framework": session.framework,
            "fetched_ahead": session.model.get("fetched_ahead"),
            "optimizers": steps.optimizers,
            "warmup": framework_warmup(session),
            "warmup_apart": apart,
            "warmup_apart_sampled": apart_sampled,
            "steady": steps.steady_count,
            "median_s": med,
            "p90_s": p90,
            "steps_per_s": (1.0 / med) if med else None,
            "training_s": wall,
            "warmup_cost_s": warmup_cost(session),
            "data_wait_share": steps.data_wait_share(),
            "device_busy_share": session.health.busy_share(med),
            "device_busy_ms": session.health.busy_ms(),
            "batches": steps.total_batches,
        },
        "memory": {
            "peak_rss": mem.peak.get("rss"),
            "peak_rss_with_workers": mem.peak.get("rss_total"),
            "peak_device_allocated": mem.peak_allocated,
            "peak_device_cached": mem.peak.get("cached"),
            "device_total": mem.device_total,
            "device_limit": mem.device_limit,
            "min_system_available": mem.min_sys_available,
            "peak_swap_used": mem.peak.get("swap_used"),
        },
        "dataloaders": list(session.dataloaders.values()),
        "crash": None
        if session.crash is None
        else {
            "type": session.crash.type,
            "message": session.crash.message,
            "where": session.crash.user_frame,
        },
        "probe_errors": session.probe_errors,
        "recording": _recording(session),
        "changes": changes(session),
        "cut": session.cut,
    }
    if session.ranks:
        summary["ranks"] = rank_rows(session)
    ops = session.ops
    if ops.sampled_steps:  # what op accounting cost the run (issue 34), against all steps
        summary["ops"] = {"sampled_steps": ops.sampled_steps, "cost_s": ops.cost_s,
                          "cost_share": ops.cost_share(steps.total_dur), "converged": ops.converged}  # fmt: skip
    return summary


def _recording(session: Session) -> RecordingDoc:
    problems = session.recording_problems()
    return {"complete": not problems, "problems": problems}


def changes(session: Session) -> ChangesDoc | None:
    """What ``--set`` changed from the script as written (None: nothing was asked)."""
    raw = session.run.get("settings")
    asked = raw if isinstance(raw, list) else []  # a damaged recording may hold anything here
    if not asked and not session.overrides:
        return None
    applied: list[AppliedDoc] = []
    skipped: list[SkippedDoc] = []
    for record in session.overrides:
        if not isinstance(record, dict):
            continue
        target = str(record.get("target", "?"))
        pairs = record.get("applied")
        for name, pair in (pairs.items() if isinstance(pairs, dict) else ()):
            before, after = (list(pair) + [None, None])[:2] if isinstance(pair, list) else (None, pair)
            applied.append({"target": target, "name": str(name), "before": before, "after": after})
        items = record.get("skipped")
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict):
                skipped.append({"target": target, "setting": str(item.get("setting", "")),
                                "reason": str(item.get("reason", ""))})
    doc: ChangesDoc = {"asked": [str(a) for a in asked], "applied": applied, "skipped": skipped}
    replaced = session.run.get("settings_replaced")
    if isinstance(replaced, dict) and replaced:
        doc["replaced"] = {str(k): str(v) for k, v in replaced.items()}
    return doc


def rank_rows(session: Session) -> list[RankRow]:
    """Per-rank figures of a distributed run (the job-level figures are rank 0's)."""
    rows: list[RankRow] = []
    for rank, sub in sorted(session.ranks.items()):
        steps, mem = sub.steps, sub.memory
        n = steps.steady_count
        _, wait = steps.steady_sums()
        rows.append({
            "rank": rank,
            "local_rank": sub.hello.get("local_rank"),
            "steps": steps.count,
            "median_s": steps.quantile(0.5),
            "p90_s": steps.quantile(0.9),
            "data_wait_share": steps.data_wait_share(),
            "data_wait_per_step_s": (wait / n) if n else None,
            "peak_memory": mem.peak_allocated or mem.peak.get("rss_total"),
            "device": sub.model.get("device"),
            "status": "crashed" if sub.crash is not None else sub.status,
        })
    return rows
