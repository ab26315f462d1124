"""``mpsprof compare RUN_A RUN_B``: the same figures of two runs side by side, with ratios.

Two runs made any way (before and after an edit, ``--set``, another machine): the rows
are the summary figures every report shows, the ratio is B / A, and for times the
ratio is also said the way people ask ("2.9x faster"). Rows come as plain text; the
text, Markdown, HTML and TUI views only format them.

One caution the view repeats: a single run against a single run measures the machine's
mood as much as the change; ``mpsprof try`` runs pairs and gives an interval.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .report.changes import change_lines
from .units import fmt_bytes, fmt_pct, fmt_seconds

if TYPE_CHECKING:
    from .results import Document, Summary

CAUTION = ("One run against one run: the machine's load moves both. `mpsprof try` runs A/B pairs and gives an "
           "interval.")


@dataclass
class Row:
    label: str
    a: str
    b: str
    ratio: str = ""


StepFigure = Literal["count", "steady", "median_s", "p90_s", "steps_per_s", "training_s", "data_wait_share",
                     "warmup_cost_s"]
"""The ``steps`` figures the table compares."""
MemoryFigure = Literal["peak_rss_with_workers", "peak_device_allocated", "peak_device_cached"]
"""The ``memory`` figures the table compares."""


def _step(summary: Summary, key: StepFigure) -> float | None:
    """A ``steps`` figure, typed by its key; None when the section is absent (the bare
    summary of a failed build) or damaged. The formatters still check each value's type."""
    steps = summary.get("steps")
    return steps.get(key) if isinstance(steps, dict) else None


def _memory(summary: Summary, key: MemoryFigure) -> int | None:
    """A ``memory`` figure, bytes (None as for :func:`_step`)."""
    memory = summary.get("memory")
    return memory.get(key) if isinstance(memory, dict) else None


def _device_kind(summary: Summary) -> str | None:
    device = summary.get("device")
    return device.get("kind") if isinstance(device, dict) else None


def _ratio(a: Any, b: Any, time_like: bool = False) -> str:
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or isinstance(a, bool) or a <= 0 or b <= 0:
        return ""
    r = b / a
    text = f"x{r:.2f}"
    if time_like and abs(r - 1) >= 0.005:
        text += f" ({1 / r:.2f}x faster)" if r < 1 else f" ({r:.2f}x slower)"
    return text


def _count(summary: Summary) -> int | None:
    n = _step(summary, "count")
    return n if isinstance(n, int) and not isinstance(n, bool) else None


def length_note(a: Summary, b: Summary) -> str:
    """What the view says above the table when the runs have different step counts: their
    totals (training time, run time) then measure the length, not the speed, so only the
    per-step figures get a "faster"/"slower"."""
    na, nb = _count(a), _count(b)
    if na is None or nb is None or na == nb:
        return ""
    return f"Runs of different length: {na} and {nb} steps; per-step figures compared."


def _per_step(summary: Summary, share: bool = False) -> float | None:
    """The training time divided by the step count (``share``: its data-wait share)."""
    n, total = _count(summary), _step(summary, "training_s")
    if not n or not isinstance(total, (int, float)) or isinstance(total, bool):
        return None
    if share:
        part = _step(summary, "data_wait_share")
        if not isinstance(part, (int, float)) or isinstance(part, bool):
            return None
        return float(total) * float(part) / n
    return float(total) / n


def rows(a: Document, b: Document) -> list[Row]:
    """The figures of two summaries (``summary.json`` documents), A then B. Speed is judged on
    per-step figures; totals get a "faster" only when both runs have the same step count."""
    same_length = not length_note(a, b)
    out = [
        Row("script", str(a.get("script", "?")), str(b.get("script", "?"))),
        Row("status", str(a.get("status", "?")), str(b.get("status", "?"))),
        Row("changed", "; ".join(change_lines(a)) or "–", "; ".join(change_lines(b)) or "–"),
        Row("cut", _cut(a), _cut(b)),
        Row("device", str(_device_kind(a) or "?"), str(_device_kind(b) or "?")),
    ]
    out.append(Row("num_workers", _workers(a), _workers(b)))

    def figure(label: str, x: float | None, y: float | None, fmt: Callable[[Any], str], time_like: bool = False) -> None:
        out.append(Row(label, fmt(x), fmt(y), _ratio(x, y, time_like)))

    def step(label: str, key: StepFigure, fmt: Callable[[Any], str], time_like: bool = False) -> None:
        figure(label, _step(a, key), _step(b, key), fmt, time_like)

    def memory(label: str, key: MemoryFigure) -> None:
        figure(label, _memory(a, key), _memory(b, key), fmt_bytes)

    step("steps", "count", _int)
    step("steady steps", "steady", _int)
    step("median step", "median_s", fmt_seconds, time_like=True)
    step("p90 step", "p90_s", fmt_seconds, time_like=True)
    figure("training time / step", _per_step(a), _per_step(b), fmt_seconds, time_like=True)
    figure("data wait / step", _per_step(a, True), _per_step(b, True), fmt_seconds, time_like=True)
    step("steps / s", "steps_per_s", lambda v: f"{v:.2f}" if isinstance(v, (int, float)) else "–")
    step("data wait", "data_wait_share", fmt_pct)
    step("warm-up cost", "warmup_cost_s", fmt_seconds)
    total = "" if same_length else " (total)"
    step("training time" + total, "training_s", fmt_seconds, time_like=same_length)
    figure("run time" + total, a.get("duration_s"), b.get("duration_s"), fmt_seconds, time_like=same_length)
    memory("peak RSS (with workers)", "peak_rss_with_workers")
    memory("peak device memory", "peak_device_allocated")
    memory("peak device cache", "peak_device_cached")
    fa, fb = (f if isinstance(f := s.get("findings"), list) else [] for s in (a, b))
    out.append(Row("findings", _rules(fa), _rules(fb), f"{len(fa)} → {len(fb)}"))
    return [r for r in out if (r.a, r.b) != ("–", "–")]


def _workers(summary: Summary) -> str:
    """The first DataLoader's ``num_workers`` ("–" when there is none, or the list is damaged)."""
    loaders = summary.get("dataloaders")
    first = loaders[0] if isinstance(loaders, list) and loaders else None
    return str(first.get("num_workers", "–")) if isinstance(first, dict) else "–"


def _cut(summary: Summary) -> str:
    cut = summary.get("cut")
    if not isinstance(cut, dict):
        return "–"
    flag = "--max-seconds" if cut.get("reason") == "max_seconds" else "--max-steps"
    return f"after {cut.get('steps')} steps ({flag})"


def _int(v: Any) -> str:
    return str(int(v)) if isinstance(v, (int, float)) and not isinstance(v, bool) else "–"


def _rules(findings: list[Any]) -> str:
    names = [str(f.get("rule")) for f in findings if isinstance(f, dict)]
    return ", ".join(names) if names else "none"


# -- loading --------------------------------------------------------------------------
def load_summary(run_dir: Path, rule_dirs: list[Path] | None = None) -> Document:
    """A run's figures and findings, recomputed from its recording (the same as report)."""
    from .report.common import ended_text, ended_without_exit
    from .results import build_results
    from .session.recording import load_runs

    loaded = load_runs([Path(run_dir)])
    doc = build_results(loaded.session, list(rule_dirs or [])).document()
    if ended_without_exit(doc, loaded.session):  # read back without an exit: never "running"
        doc["status"] = ended_text(doc, loaded.session)
    return doc


# -- rendering ------------------------------------------------------------------------
def render_text(a_name: str, b_name: str, table: list[Row], note: str = "") -> str:
    width = max(len(r.label) for r in table)
    wa = min(48, max(len(a_name), *(len(r.a) for r in table)))
    wb = min(48, max(len(b_name), *(len(r.b) for r in table)))
    lines = [f"{'':<{width}}  {'A':<{wa}}  {'B':<{wb}}  B / A", f"{'':<{width}}  {_clip(a_name, wa):<{wa}}  "
             f"{_clip(b_name, wb):<{wb}}"]
    if note:
        lines = [note, ""] + lines
    for r in table:
        lines.append(f"{r.label:<{width}}  {_clip(r.a, wa):<{wa}}  {_clip(r.b, wb):<{wb}}  {r.ratio}".rstrip())
    return "\n".join(lines + ["", CAUTION, ""])


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def render_markdown(a_name: str, b_name: str, table: list[Row], note: str = "") -> str:
    from .report.markdown import cell, code
    from .report.markdown import escape as md_escape

    out = ["# mpsprof compare", "", f"A: {code(a_name)}  ", f"B: {code(b_name)}", ""]
    out += [f"**{md_escape(note)}**", ""] if note else []
    out += ["| Figure | A | B | B / A |", "|---|---|---|---:|"]
    out += [f"| {cell(r.label)} | {cell(r.a)} | {cell(r.b)} | {cell(r.ratio)} |" for r in table]
    return "\n".join(out + ["", md_escape(CAUTION), ""])


def render_html(a_name: str, b_name: str, table: list[Row], note: str = "") -> str:
    body = "".join(f"<tr><th>{escape(r.label)}</th><td>{escape(r.a)}</td><td>{escape(r.b)}</td>"
                   f"<td class=\"num\">{escape(r.ratio)}</td></tr>" for r in table)
    css = ("body{font:14px system-ui,sans-serif;margin:2em}table{border-collapse:collapse}"
           "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}.num{text-align:right}")
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
            f"<title>mpsprof compare</title><style>{css}</style></head><body><h1>mpsprof compare</h1>"
            f"<p>A: <code>{escape(a_name)}</code><br>B: <code>{escape(b_name)}</code></p>"
            + (f"<p><strong>{escape(note)}</strong></p>" if note else "") +
            f"<table><tr><th>Figure</th><th>A</th><th>B</th><th>B / A</th></tr>{body}</table>"
            f"<p>{escape(CAUTION)}</p></body></html>\n")


# -- command --------------------------------------------------------------------------
def add_compare_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_a", type=Path, metavar="RUN_A", help="the first run directory (A)")
    parser.add_argument("run_b", type=Path, metavar="RUN_B", help="the second run directory (B)")
    parser.add_argument("--format", "-f", choices=["text", "md", "html"],
                        help="text, md or html (default: the TUI in a terminal, else text)")
    parser.add_argument("-o", "--output", type=Path, help="file to write (default: standard output)")
    parser.add_argument("--rules", action="append", type=Path, default=[], metavar="DIR", help="add your rule files")


def main_compare(args: argparse.Namespace) -> int:
    from .errors import UsageError
    from .events import SchemaError
    from .session.recording import RecordingError

    try:
        a, b = load_summary(args.run_a, args.rules), load_summary(args.run_b, args.rules)
    except (RecordingError, SchemaError) as exc:
        raise UsageError(str(exc)) from None
    table, note = rows(a, b), length_note(a, b)
    fmt = args.format
    if fmt is None and args.output is None and sys.stdout.isatty() and sys.stdin.isatty():
        from .tui.compare import run_compare_tui

        run_compare_tui(str(args.run_a), str(args.run_b), table, CAUTION, note)
        return 0
    fmt = fmt or "text"
    render = {"text": render_text, "md": render_markdown, "html": render_html}[fmt]
    text = render(str(args.run_a), str(args.run_b), table, note)
    from .rundir import print_or_write

    error = print_or_write(text, args.output)
    if error:
        raise UsageError(error)
    return 0
