"""Words for what a run changed (``--set``) and why it ended early (``--max-steps``).

Every view (console summary, Markdown, HTML, TUI) says these the same way, so a
report never shows figures of a changed or shortened run without saying so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..results import Results, Summary


def cut_text(summary: Summary) -> str | None:
    """``cut after 20 steps (--max-steps 20)``, or None when the run was not cut."""
    cut = summary.get("cut")
    if not isinstance(cut, dict):
        return None
    if cut.get("reason") == "max_seconds":
        why = f"--max-seconds {cut.get('max_seconds')}"
    else:
        why = f"--max-steps {cut.get('max_steps')}"
    return f"cut after {cut.get('steps')} steps ({why}): ended cleanly at a step boundary"


def change_lines(summary: Summary) -> list[str]:
    """One line per change applied and per change refused (with the reason)."""
    changes = summary.get("changes")
    if not isinstance(changes, dict):
        return []
    lines = []
    for item in _dicts(changes.get("applied")):
        before = _value(item.get("before"))
        after = _value(item.get("after"))
        if before == "None":
            lines.append(f"{item.get('target')}: {item.get('name')}={after}")
        else:
            lines.append(f"{item.get('target')}: {item.get('name')} {before} → {after}")
    for item in _dicts(changes.get("skipped")):
        lines.append(f"{item.get('target')}: NOT applied {item.get('setting')}: {item.get('reason')}")
    raw = changes.get("asked")
    asked_all = [str(a) for a in raw] if isinstance(raw, list) else []
    asked = [a for a in asked_all if a.startswith("env.")]
    raw_replaced = changes.get("replaced")
    replaced = {str(k): str(v) for k, v in raw_replaced.items()} if isinstance(raw_replaced, dict) else {}
    lines.extend(f"environment: {a[4:]}{_env_note(a, asked, replaced)}" for a in asked)
    if not lines and asked_all:
        lines.append("asked " + ", ".join(asked_all) + ": nothing it applies to was created")
    return lines


def _env_note(item: str, asked: list[str], replaced: dict[str, str]) -> str:
    """The low watermark ratio ``--set`` pairs with a high one given alone says so, and
    whether it was added or took the place of the shell's own; any other variable the
    shell had set otherwise says the shell's value."""
    from ..settings import AUTO_LOW_NOTE, REPLACED_LOW_NOTE, SHELL_NOTE

    shell = replaced.get(item[4:].split("=", 1)[0])
    if _paired_low(item, asked):
        return f" ({REPLACED_LOW_NOTE.format(shell=shell) if shell is not None else AUTO_LOW_NOTE})"
    return f" ({SHELL_NOTE.format(shell=shell)})" if shell is not None else ""


def _paired_low(item: str, asked: list[str]) -> bool:
    """Is ``item`` the low ratio :func:`~mpsprofiler.settings.parse_settings` pairs with
    the high one asked alone?"""
    from ..devices.mps_rules import HIGH, LOW, needs_low, paired_low

    if not item.startswith(f"env.{LOW}="):
        return False
    high = next((a.split("=", 1)[1] for a in asked if a.startswith(f"env.{HIGH}=")), None)
    try:
        return high is not None and needs_low(float(high)) and float(item.split("=", 1)[1]) == paired_low(float(high))
    except ValueError:
        return False


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def experiment_lines(results: Results, rule: str | None = None) -> list[str]:
    """``mpsprof try`` results (all, or those trying ``rule``'s fix), one line each."""
    out = []
    for exp in getattr(results, "experiments", None) or []:
        if not isinstance(exp, dict):
            continue
        if rule is not None and exp.get("rule") != rule:
            continue
        text = str(exp.get("headline") or "")
        details = []
        a, b = _numbers(exp.get("a_median_s")), _numbers(exp.get("b_median_s"))
        if a and b:
            a_ms, b_ms = sorted(a)[len(a) // 2] * 1000, sorted(b)[len(b) // 2] * 1000
            details.append(f"step {a_ms:.1f} ms → {b_ms:.1f} ms")
        loss = exp.get("loss")
        if isinstance(loss, dict):
            details.append("loss equivalent" if loss.get("equivalent") else "loss DIFFERS")
        if rule is None and exp.get("rule"):
            details.append(f"fix of {exp['rule']}")
        if exp.get("env_drift"):
            details.append("run from another environment than the recorded run's")
        out.append(text + (f" ({'; '.join(details)})" if details else ""))
    return out


def _numbers(values: Any) -> list[float]:
    """The finite numbers of a stored list (``experiments.json`` is a file anyone may edit)."""
    if not isinstance(values, list):
        return []
    return [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool) and -1e12 < v < 1e12]


def _dicts(values: Any) -> list[dict[str, Any]]:
    return [v for v in values if isinstance(v, dict)] if isinstance(values, list) else []
