"""The crash as a finding of the TUI: a script that dies before its first step (a
SyntaxError, an ImportError, a missing file) has no rule to fire, and the Overview and
Findings panels said "No problems found" under a "crashed" badge.

The finding says what headless mode's summary says (its ``crash`` line, the same words,
from :func:`~mpsprofiler.report.console.crash_line`), with where to look. A rule that
explains the crash (``oom-crash``, ``float64-mps-crash`` ...) keeps the crash to itself,
and a stop by the user (q, s, Ctrl-C) is no crash at all.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..diagnosis.findings import Finding
from ..report.console import crash_line, crash_title
from ..report.markdown import code, escape, fenced
from ..session.session import Session
from .panels import PANEL_KEYS

RULE = "crash"


def crash_finding(session: Session, findings: Sequence[Finding]) -> Finding | None:
    """The crash of ``session`` as a critical finding, or None (no crash, a stop by the
    user, or a rule's finding already names the crash)."""
    crash = session.crash
    if crash is None or session.status != "crashed":
        return None
    if any(f.rule == RULE or f.rule.endswith("-crash") for f in findings):
        return None
    where = crash.user_frame
    as_dict = {"type": crash.type, "message": crash.message, "where": where}
    line = crash_line(as_dict)
    steps = session.steps.count
    place = f" at {code(str(where.get('file')) + ':' + str(where.get('line')))}" if where else ""
    source = f"\n\n{fenced(str(where.get('code')), 'python')}" if where and where.get("code") else ""
    return Finding(
        rule=RULE, severity="critical",
        title=crash_title(as_dict, steps),
        evidence=f"{escape(line)}{source}",
        fix=f"Fix the {escape(crash.type)}{place} and run again; the whole traceback is in the Log panel "
            f"({PANEL_KEYS['log']}) and the Warnings panel ({PANEL_KEYS['warnings']}).",
        first_step=steps or None,
        facts={"crash_type": crash.type, "crash_message": crash.message},
    )
