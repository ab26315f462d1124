"""Fixes that rewrite the same call of the script, shown as one call.

A fix shows the script's own call rewritten with its change (source_edit.rewrite_call).
Two findings may rewrite the same one: a Trainer's loader fix sets
``dataloader_num_workers=4`` in the script's ``TrainingArguments(...)`` and the sync fix
``logging_nan_inf_filter=False`` in the same call. Each shown alone, the call of the one
copied in last undoes the other's change. So once the rules have run, the findings whose
fixes show a rewrite of one call (an ``X_edit`` fact, :func:`~.analyzers.source_edit.edit_record`,
whose statement the fix text holds) each show that call with all of their changes, and say
which other finding's change it carries. ``mpsprof patch`` makes them one after the other
on the text the one before left (patch/plan.py), so the patches agree with the texts.
"""

from __future__ import annotations

from typing import Any

from .analyzers.source_edit import EDIT_SUFFIX, rewrite_call
from .findings import Finding


def carry_shared_calls(findings: list[Finding], facts: dict[str, Any]) -> list[Finding]:
    """``findings`` with the fixes of one call merged (in place; the list is returned)."""
    edits = {name: e for name, e in facts.items() if name.endswith(EDIT_SUFFIX) and _valid(e)}
    groups: dict[tuple[str, int], list[tuple[Finding, str, dict[str, Any]]]] = {}
    for f in findings:
        for name, e in edits.items():
            if e["after"] in f.fix:
                groups.setdefault((e["file"], e["line"]), []).append((f, name[:-len(EDIT_SUFFIX)], e))
    for (file, line), shown in groups.items():
        if len({id(f) for f, _, _ in shown}) < 2:
            continue
        changes: dict[str, str] = {}
        for _, _, e in shown:
            for key, value in e["changes"].items():
                changes.setdefault(key, value)
        if any(changes[k] != v for _, _, e in shown for k, v in e["changes"].items()):
            continue  # two fixes want different values for one argument: each stays its own
        names = tuple(shown[0][2]["names"])
        merged = rewrite_call(file, line, names, changes)
        if merged is None:
            continue
        for f, fact, e in shown:
            f.fix = f.fix.replace(e["after"], merged.after)
            if isinstance(f.facts.get(fact), str):
                f.facts[fact] = f.facts[fact].replace(e["after"], merged.after)
            others = [(g, o) for g, _, o in shown if g is not f]
            carried = ", ".join(f"`{k}={v}`" for g, o in others for k, v in o["changes"].items()
                                if k not in e["changes"])
            rules = ", ".join(sorted({g.rule for g, _ in others}))
            if carried:
                f.fix = f.fix.rstrip() + (f"\n\nThe `{names[0]}(...)` call above carries the change of the fix for {rules} too "
                          f"({carried}): both fixes edit this one call.")
    return findings


def _valid(e: Any) -> bool:
    return (isinstance(e, dict) and isinstance(e.get("file"), str) and isinstance(e.get("line"), int)
            and isinstance(e.get("changes"), dict) and isinstance(e.get("after"), str) and bool(e["after"])
            and isinstance(e.get("names"), list) and bool(e["names"]))
