"""The crash as a finding: a script that dies of something no rule explains (a SyntaxError,
an ImportError, a missing file, its own ``raise``) is a critical finding too.

Made here, in the diagnosis, so every view says the same: the headless summary listed it,
the TUI listed it, but ``summary.json`` and the Markdown, HTML and JSON reports had no
finding ("0 findings · No rule found a problem in this run" for a run that crashed). Its
title is the ``crash`` line the headless summary prints
(:func:`~.analyzers.crash.crash_line`). A rule that explains the crash (``oom-crash``,
``float64-mps-crash`` ...) keeps the crash to itself, and a stop by the user (q, s,
Ctrl-C) is no crash at all.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..mdtext import code, escape, fenced
from ..session.session import Session
from .analyzers.crash import crash_line, crash_title, raised_at
from .findings import Finding

RULE = "crash"


def crash_finding(session: Session, findings: Sequence[Finding]) -> Finding | None:
    """The crash of ``session`` as a critical finding, or None (no crash, a stop by the
    user, or a rule's finding already names the crash)."""
    crash = session.crash
    if crash is None or session.status != "crashed":
        return None
    if any(f.rule == RULE or f.rule.endswith("-crash") for f in findings):
        return None
    where = raised_at(crash)  # a DataLoader worker's raise: its line
    as_dict = {"type": crash.type, "message": crash.message, "where": where}
    line = crash_line(as_dict)
    steps = session.steps.count
    place = f" at {code(str(where.get('file')) + ':' + str(where.get('line')))}" if where else ""
    source = f"\n\n{fenced(str(where.get('code')), 'python')}" if where and where.get("code") else ""
    return Finding(
        rule=RULE, severity="critical",
        title=crash_title(as_dict, steps),
        evidence=f"{escape(line)}{source}",
        fix=f"Fix the {escape(crash.type)}{place} and run again. The whole traceback is in the Log and "
            "Warnings panels (`mpsprof view`, keys 6 and 8) and in the Crash section of `mpsprof report`.",
        first_step=steps or None,
        facts={"crash_type": crash.type, "crash_message": crash.message},
    )


def with_crash(session: Session, findings: list[Finding]) -> list[Finding]:
    """``findings`` with the crash's own finding first when it has one."""
    crash = crash_finding(session, findings)
    return [crash, *findings] if crash is not None else findings
