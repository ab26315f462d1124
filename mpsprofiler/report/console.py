"""The short plain-text summary printed at the end of a run (to stderr).

Headless mode prints it when the script ends, the TUI once the app has left the
terminal: one renderer, so both end with the same findings, run directory and follow-up
commands.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..diagnosis.analyzers.crash import crash_line
from ..diagnosis.crash_finding import RULE as CRASH_RULE
from ..session.exit_words import exit_words
from ..session.steps import signal_words
from ..units import fmt_bytes, fmt_pct, fmt_seconds
from .changes import change_lines, cut_text, experiment_lines
from .common import ops_cost_words, warmup_words

if TYPE_CHECKING:
    from ..diagnosis.findings import Finding, FindingDoc
    from ..results import Results, Summary

SEVERITY_MARK = {"critical": "CRIT", "warning": "WARN", "info": "info"}


def render_console(summary: Summary, findings: Iterable[Finding | FindingDoc] = (), run_dir: str | None = None,
                   tried: Iterable[str] = ()) -> str:
    """The end-of-run summary. ``tried``: the verdicts of the fixes tried (``t`` in the TUI,
    ``experiment_lines``), printed as the reports' "Tried" lines are."""
    steps, mem = _section(summary, "steps"), _section(summary, "memory")
    device, exit_info = _section(summary, "device"), _section(summary, "exit")
    lines = ["", "── mpsprof ─────────────────────────────────────────────"]
    status = str(summary.get("status", "?"))
    if status == "stopped":
        pass  # q, s or Ctrl-C: the next line says when
    else:
        status = exit_words(status, exit_info.get("returncode"), exit_info.get("signal"), summary.get("crash"))
    recording = _section(summary, "recording")
    problems = [str(p) for p in recording.get("problems") or []] if isinstance(recording.get("problems"), list) else []
    if problems:
        status += ", recording incomplete"
    lines.append(f"{summary.get('script', '?')}: {status} after {fmt_seconds(summary.get('duration_s'))}")
    lines += [f"recording   INCOMPLETE: {p}" for p in problems]
    lines.append(f"device      {device.get('kind', '?')}  {device.get('name') or ''}".rstrip())
    if steps.get("count"):
        lines.append(
            f"steps       {steps.get('count', 0)} ({warmup_words(steps)}, from {signal_words(steps.get('mode'), steps.get('framework'), steps.get('fetched_ahead'), steps.get('optimizers'))})   "
            f"median {fmt_seconds(steps.get('median_s'))}   p90 {fmt_seconds(steps.get('p90_s'))}"
        )
    elif summary.get("crash"):
        lines.append("steps       0 (the script crashed before its first step ended)")
    elif problems:  # the steps may have run, their events lost: "none seen" would be false
        lines.append("steps       0 recorded (the events that counted them never arrived: see recording above)")
    else:
        lines.append("steps       0 (no optimizer step, backward pass, DataLoader batch or mpsprofiler.step() seen)")
    busy = steps.get("device_busy_share")
    busy_text = f"   device busy {fmt_pct(busy)} of a median step" if busy is not None else ""
    lines.append(f"data wait   {fmt_pct(steps.get('data_wait_share'))} of steady step time{busy_text}")
    mem_parts = [f"RSS peak {fmt_bytes(mem.get('peak_rss_with_workers') or mem.get('peak_rss'))}"]
    if mem.get("peak_device_allocated") is not None:
        mem_parts.append(f"device peak {fmt_bytes(mem.get('peak_device_allocated'))}")
    if mem.get("device_limit"):
        mem_parts.append(f"limit {fmt_bytes(mem.get('device_limit'))}")
    lines.append("memory      " + "   ".join(mem_parts))
    ops_cost = ops_cost_words(summary)
    if ops_cost:
        lines.append(f"profiler    op accounting: {ops_cost}")
    cut = cut_text(summary)
    if cut:
        lines.append(f"cut         {cut}")
    for i, change in enumerate(change_lines(summary)):
        lines.append(("changed     " if i == 0 else "            ") + change)
    crash = _section(summary, "crash")
    if summary.get("status") == "stopped":  # q, s or Ctrl-C: the user's stop, never a crash
        lines.append(f"stopped     {stopped_text(steps.get('count'))}")
    elif crash:
        lines.append(f"crash       {crash_line(crash)}")
    findings = list(findings)
    if findings:
        lines.append("")
        lines.append(f"findings ({len(findings)}):")
        for f in findings:
            d = f if isinstance(f, dict) else f.to_dict()
            mark = SEVERITY_MARK.get(d.get("severity", "info"), d.get("severity", ""))
            lines.append(f"  [{mark}] {d.get('title')}  ({d.get('rule')})")
            # the first paragraph; tables (per-rank, per-op) stay in the reports
            evidence = str(d.get("evidence", "")).strip().split("\n|")[0].split("\n\n")[0]
            if evidence and d.get("rule") != CRASH_RULE:  # the crash's own finding: its title is the crash line
                lines.append(f"         {evidence}")
    else:
        lines.append("findings    none")
    for i, line in enumerate(tried):
        lines.append(("tried       " if i == 0 else "            ") + line)
    errors = summary.get("probe_errors")
    for err in [e for e in errors if isinstance(e, dict)] if isinstance(errors, list) else []:
        where = f" (at {str(err['where'])})" if err.get("where") else ""
        lines.append(f"note        profiler instrument '{err.get('instrument')}' was switched off: {err.get('message')}{where}")
    if run_dir:
        lines.append("")
        lines.append(f"run saved in {run_dir}")
        quoted = shlex.quote(run_dir)  # pasted into a shell as printed: spaces, quotes and $ survive
        lines.append(f"  mpsprof view {quoted}      mpsprof report {quoted} --format md")
    lines.append("")
    return "\n".join(lines)


def _section(summary: Mapping[str, Any], key: str) -> dict[str, Any]:
    """A nested mapping of the summary, {} when absent or damaged (not a mapping)."""
    value = summary.get(key)
    return value if isinstance(value, dict) else {}


def stopped_text(steps: Any) -> str:
    """``at step 12, by the user``: a stop (q, s, Ctrl-C), whatever the script raised for it."""
    return f"at step {steps if isinstance(steps, int) else 0}, by the user"


def print_summary(results: Results, run_dir: str | None) -> None:
    """Write the end-of-run summary of ``results`` to stderr; a bug here or a closed
    stderr must never cost the run its exit status, so nothing escapes."""
    try:
        text = render_console(results.summary, results.findings, run_dir, experiment_lines(results))
    except Exception as exc:  # noqa: BLE001 - the exit status still counts
        text = f"mpsprof: internal error while printing the summary ({type(exc).__name__}: {exc})\n"
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError):  # stderr closed or a broken pipe
        pass
