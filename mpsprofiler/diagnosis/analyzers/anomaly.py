"""Autograd's anomaly detection on while the training runs: the line that turned it on and
what to write there, for ``rules/anomaly-detection.yaml``.

The probe reads ``torch.is_anomaly_enabled()`` at each sampled step's backward pass and
records the calls that turned it on (``probe/anomaly.py``). A debugging switch, per torch's
own docstring (torch/autograd/anomaly_mode.py, ``detect_anomaly``: "should be enabled only
for debugging as the different tests will slow down your program execution"): each forward
op records its Python traceback, and with ``check_nan`` each backward op's output is checked
for NaN, a device sync per op on MPS and CUDA.

``anomaly_fix_where`` says what the line is, for the rule's phrases: ``set`` (a
``set_detect_anomaly(True)`` call in the script, turned off by ``False``), ``context`` (a
``with ...detect_anomaly(...)`` block: the with goes, its body stays), ``lightning_arg``
(Lightning turned it on for the script's ``Trainer(..., detect_anomaly=True)``: that
argument, False), ``library`` (another package turned it on), ``unknown`` (no line).
``anomaly_found_at`` says the same of the evidence's clause, ``anomaly_checks`` whether NaN
checks are on (``nan``, ``no_nan``).
"""

from __future__ import annotations

import ast
import os
from typing import Any

from ...session.session import Session
from .registry import analyzer
from .source_edit import call_name, read_tree, rewrite_call, short_path
from .sync_fix import library_path

ANOMALY_FACTS = ("anomaly_on", "anomaly_sampled", "anomaly_steps", "anomaly_where", "anomaly_code",
                 "anomaly_fix_code", "anomaly_fix_where", "anomaly_found_at", "anomaly_checks", "anomaly_calls",
                 "anomaly_file", "anomaly_line")
SWITCHES = ("set_detect_anomaly", "set_anomaly_enabled")
"""The calls that turn the mode on or off by their first argument (``mpsprof patch`` writes False there)."""
CONTEXTS = ("detect_anomaly", "set_detect_anomaly")
"""The context managers that turn it on for their block (``mpsprof patch`` takes the ``with`` away)."""


def _statement(path: str, line: int) -> tuple[str, ast.stmt | None]:
    """The source text of ``line`` and the innermost statement that starts there."""
    parsed = read_tree(path)
    if parsed is None:
        return "", None
    source, tree = parsed
    lines = source.splitlines()
    text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    best: ast.stmt | None = None
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node.lineno == line:
            if best is None or (node.end_lineno or line) <= (best.end_lineno or line):
                best = node
    return text, best


def _fix(stmt: ast.stmt | None, text: str) -> tuple[str, str]:
    """(``anomaly_fix_where``, the code to write at the line)."""
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return "context", ""  # worded by the rule: the with goes, its body stays
    for name in SWITCHES:
        at = text.find(name + "(")
        if at >= 0:
            return "set", f"{text[:at + len(name) + 1]}False)  # True only while debugging"
    return "unknown", ""


def _trainer_argument(session: Session) -> tuple[str, int, str, str] | None:
    """Lightning turns the mode on for ``Trainer(detect_anomaly=True)`` (its fit loop enters
    ``torch.autograd.set_detect_anomaly(self._detect_anomaly)``): the script's call with that
    argument (file, line, the call's first line, the statement rewritten with
    ``detect_anomaly=False``), where the script is one file the run names; else None."""
    script = session.run.get("target") or session.run.get("script")
    if not isinstance(script, str) or session.run.get("module"):
        return None
    path = script if os.path.isabs(script) else os.path.join(str(session.run.get("cwd") or ""), script)
    parsed = read_tree(path)
    if parsed is None:
        return None
    source, tree = parsed
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and call_name(node) == "Trainer" and any(
                kw.arg == "detect_anomaly" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False)
                for kw in node.keywords):
            rewrite = rewrite_call(path, node.lineno, ("Trainer",), {"detect_anomaly": "False"})
            if rewrite is None:
                return None
            lines = source.splitlines()
            return path, rewrite.line, lines[rewrite.line - 1].strip(), rewrite.after
    return None


@analyzer("anomaly", provides=ANOMALY_FACTS)
def anomaly_facts(session: Session) -> dict[str, Any]:
    ops = session.ops
    if ops.anomaly_steps == 0:
        return {}
    facts: dict[str, Any] = {"anomaly_on": True, "anomaly_steps": ops.anomaly_steps,
                             "anomaly_sampled": ops.sampled_steps,
                             "anomaly_checks": "nan" if ops.anomaly_check_nan else "no_nan"}
    sites = ops.anomaly_sites
    if not sites:
        facts.update(anomaly_where=None, anomaly_code=None, anomaly_fix_code=None, anomaly_fix_where="unknown",
                     anomaly_found_at="unknown", anomaly_calls=0)
        return facts
    site = max(sites, key=lambda s: s["calls"])  # a `with` entered at every step over a one-off call
    path, line = str(site["file"]), int(site["line"])
    facts.update(anomaly_calls=int(site["calls"]), anomaly_file=path, anomaly_line=line)  # for mpsprof patch
    if library_path(path) != path:  # a package's file, not the script's
        trainer = _trainer_argument(session) if "lightning" in library_path(path) else None
        if trainer is not None:  # the script's Trainer(..., detect_anomaly=True)
            file, at, text, code = trainer
            facts.update(anomaly_where=f"{short_path(file, session.run.get('cwd'))}:{at}", anomaly_code=text,
                         anomaly_fix_code=code, anomaly_fix_where="lightning_arg", anomaly_found_at="lightning_arg",
                         anomaly_file=file, anomaly_line=at)
            return facts
        facts.update(anomaly_where=library_path(path) + f":{line}", anomaly_code=None, anomaly_fix_code=None,
                     anomaly_fix_where="library", anomaly_found_at="library")
        return facts
    text, stmt = _statement(path, line)
    where, code = _fix(stmt, text)
    facts.update(anomaly_where=f"{short_path(path, session.run.get('cwd'))}:{line}", anomaly_code=text or None,
                 anomaly_fix_code=code or None, anomaly_fix_where=where,
                 anomaly_found_at=where if text else "unknown")
    return facts
