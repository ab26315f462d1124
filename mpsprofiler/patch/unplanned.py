"""The one "not patched" line of a finding that gets no patch, and its record in the run
directory.

Two cases, one form (``not patched: <rule>: <what to edit by hand> (<why>)``, the words in
:mod:`.texts`): a rule with no planner (its fix is a change of the training, of the
environment, or of code the recording does not locate), and a planned fix whose construct
was not where the finding says (the planner's own first sentence gives the place and the
reason). The place is the one the finding names (the crash's file:line, the DataLoader's
line, the script); a command is taken from the finding's own fix text, never made up.
"""

from __future__ import annotations

import os
import re
import string
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..diagnosis.findings import Finding
from ..session.session import Session
from . import texts

NOT_PATCHED_SUFFIX = ".not-patched.txt"
PLANNER_LINE = re.compile(r"^not patched: edit (?P<where>\S+) by hand \((?P<what>.*)\): (?P<why>.*)$", re.S)
"""A planner's sentence for an edit it refused (:meth:`.edits._Edits.edit`)."""


def unplanned_line(session: Session, finding: Finding, facts: Mapping[str, Any], script: str | None) -> str:
    """The line for ``finding``, whose rule has no planner."""
    hand = texts.HAND.get(finding.rule, texts.UNKNOWN)
    values = _values(session, finding, facts, hand, script)
    what = next((text for text in (_fill(t, values) for t in hand.what) if text is not None), hand.what[-1])
    if hand.env:
        what = texts.NOT_CODE.format(what=what)
    why = _fill(hand.why, values) or hand.why
    return texts.LINE.format(rule=finding.rule, what=what, why=why)


def planner_line(rule: str, not_patched: list[str]) -> str:
    """The one line for a planned fix that changed nothing, from its planner's sentences."""
    first = not_patched[0] if not_patched else ""
    formed = texts.LINE.split("{what}")[0].format(rule=rule)  # "not patched: <rule>: "
    if first.startswith(formed) and first.endswith(")"):
        # the planner handed over the rule's own whole line (unplanned_line): said once, not
        # wrapped in "edit by hand as the finding's fix says (not patched: <rule>: ...)"
        more = texts.MORE.format(n=len(not_patched) - 1) if len(not_patched) > 1 else ""
        return first[:-1] + more + ")"
    m = PLANNER_LINE.match(first)
    if m:
        what, why = texts.PLANNER_EDIT.format(where=m["where"], what=m["what"]), m["why"]
    else:
        what, why = texts.PLANNER_OTHER, first.removeprefix("not patched: ")
    if len(not_patched) > 1:
        why += texts.MORE.format(n=len(not_patched) - 1)
    return texts.LINE.format(rule=rule, what=what, why=why)


def not_patched_file(run_dir: Path, rule: str) -> Path:
    """``RUN_DIR/fix-<rule>.not-patched.txt``: beside ``fix-<rule>.patch``, which it replaces
    for a finding that has none."""
    from ..rundir import fix_file

    return fix_file(run_dir, rule, NOT_PATCHED_SUFFIX)


def record(run_dir: Path | None, rule: str, line: str | None) -> str | None:
    """Write ``line`` to the rule's record (None: remove a stale one: the rule has a patch
    now); why not, or None."""
    if run_dir is None:
        return None
    path = not_patched_file(run_dir, rule)
    if line is None:
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            return f"cannot remove {path}: {exc.strerror or exc}"
        return None
    from ..rundir import write_text_atomic

    return write_text_atomic(path, line + "\n")


def _values(session: Session, finding: Finding, facts: Mapping[str, Any], hand: texts.Hand,
            script: str | None) -> dict[str, Any]:
    root = os.path.dirname(script) if script else str(session.run.get("cwd") or os.getcwd())
    values = {k: v for k, v in facts.items() if v is not None and v != ""}
    values["script"] = os.path.basename(script) if script else "the script"
    crash_file, crash_line = facts.get("crash_file"), facts.get("crash_line")
    if crash_file and isinstance(crash_line, int):
        values["crash_at"] = f"{_short(session, str(crash_file), root)}:{crash_line}"
    loader = _loader_at(session, facts, root)
    if loader:
        values["loader_at"] = loader
    if hand.command:
        m = re.search(hand.command, finding.fix or "", re.M)
        if m:
            values["command"] = (m.group(1) if m.groups() else m.group(0)).strip()
    return values


def _loader_at(session: Session, facts: Mapping[str, Any], root: str) -> str | None:
    """The DataLoader the finding names (``loader_place``), else the run's only one."""
    place = facts.get("loader_place")
    if place:
        return f"the DataLoader at {place}"
    placed = [d for d in session.dataloaders.values() if isinstance(d, dict) and d.get("file") and d.get("line")]
    if len(placed) == 1:
        return f"the DataLoader at {_short(session, str(placed[0]['file']), root)}:{placed[0]['line']}"
    return None


def _short(session: Session, path: str, root: str) -> str:
    full = os.path.realpath(path if os.path.isabs(path) else os.path.join(str(session.run.get("cwd") or ""), path))
    real = os.path.realpath(root)
    return os.path.relpath(full, real) if full.startswith(real + os.sep) else full


def _fill(template: str, values: Mapping[str, Any]) -> str | None:
    """``template`` with ``values``; None where it names one that is missing."""
    names = [name for _, name, _, _ in string.Formatter().parse(template) if name]
    if any(name not in values for name in names):
        return None
    try:
        return template.format_map(values)
    except (KeyError, ValueError, IndexError, TypeError):
        return None
