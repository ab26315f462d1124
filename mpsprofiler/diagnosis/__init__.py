"""Diagnosis: analyzers turn a session into named facts; rules turn facts into findings.

Rules are data (top-level ``rules/``, plus the user's ``--rules`` folders) evaluated by
:mod:`.engine`; nothing here knows about any particular rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ..session.session import Session
from .facts import collect_facts


@dataclass
class Diagnosis:
    facts: dict[str, Any]
    findings: list[Any] = field(default_factory=list)
    rule_errors: list[Any] = field(default_factory=list)


_RULESET_CACHE: dict[tuple[str, ...], Any] = {}


def cached_ruleset(rule_dirs: Iterable[Path] = ()) -> Any:
    """The builtin rules plus the user's, loaded once per process (live runs re-evaluate)."""
    from .rules import load_builtin_and_user

    key = tuple(str(Path(d).resolve()) for d in rule_dirs)
    if key not in _RULESET_CACHE:
        _RULESET_CACHE[key] = load_builtin_and_user([Path(d) for d in rule_dirs])
    return _RULESET_CACHE[key]


def diagnose(session: Session, rule_dirs: Iterable[Path] = ()) -> Diagnosis:
    from .engine import evaluate

    ruleset = cached_ruleset(rule_dirs)
    facts = collect_facts(session)
    findings = evaluate(ruleset, facts, session.device_kind)
    return Diagnosis(facts=facts, findings=findings, rule_errors=list(ruleset.errors))
