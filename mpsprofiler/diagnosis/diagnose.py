"""The diagnosis of a session: its facts, the rules evaluated on them, one finding per cause.

Rules are data (top-level ``rules/``, plus the user's ``--rules`` folders) evaluated by
:mod:`.engine`; nothing here knows about any particular rule.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..session.session import Session
from .crash_finding import with_crash
from .facts import collect_facts
from .findings import one_per_cause
from .shared_calls import carry_shared_calls

if TYPE_CHECKING:
    from .findings import Finding
    from .rules import RuleError, RuleSet


@dataclass
class Diagnosis:
    facts: dict[str, Any]
    findings: list[Finding] = field(default_factory=list)
    rule_errors: list[RuleError] = field(default_factory=list)


_RULESET_CACHE: dict[tuple[str, ...], RuleSet] = {}


def cached_ruleset(rule_dirs: Iterable[Path] = ()) -> RuleSet:
    """The builtin rules plus the user's, loaded once per process (live runs re-evaluate)."""
    from ..rundir import real_path
    from .rules import load_builtin_and_user

    key = tuple(str(real_path(Path(d))) for d in rule_dirs)  # a symlink loop: the loader reports it
    if key not in _RULESET_CACHE:
        _RULESET_CACHE[key] = load_builtin_and_user([Path(d) for d in rule_dirs])
    return _RULESET_CACHE[key]


PROVISIONAL_MIN_STEPS = 5
"""Steady steps before a live run may show provisional findings."""
STEP_COUNT_FACTS = ("steady_steps", "steady_batches")
"""Facts that only gate how much evidence a rule wants, never what it says."""


def diagnose(session: Session, rule_dirs: Iterable[Path] = (), *, provisional: bool = False) -> Diagnosis:
    """Facts and findings of ``session``. With ``provisional`` (a live run), rules whose
    only missing condition is their minimum step count are evaluated as if it were met,
    from :data:`PROVISIONAL_MIN_STEPS` steady steps on: a clear 80% data wait shows after
    a handful of steps, marked provisional until the rule's own count confirms it."""
    from .engine import broken_rules, evaluate

    ruleset = cached_ruleset(rule_dirs)
    facts = collect_facts(session)
    if not session.is_distributed:
        findings = evaluate(ruleset, facts, session.device_kind)
        if provisional:
            findings = one_per_cause(findings + _provisional(ruleset, facts, session.device_kind, findings))
        findings = carry_shared_calls(findings, facts)
        return Diagnosis(facts=facts, findings=with_crash(session, findings),
                         rule_errors=[*ruleset.errors, *broken_rules(ruleset)])
    cross = [r for r in ruleset.rules if CROSS_RANK_FACT in getattr(r.condition, "names", ())]
    per_rank = [r for r in ruleset.rules if r not in cross]
    findings = evaluate(cross, facts, session.device_kind)
    by_rule: dict[str, tuple[Finding, list[int]]] = {}
    for rank, sub in sorted(session.ranks.items()):
        for finding in evaluate(per_rank, collect_facts(sub), sub.device_kind):
            first, ranks = by_rule.setdefault(finding.rule, (finding, []))
            ranks.append(rank)
    for finding, ranks in by_rule.values():
        finding.title = f"{_ranks_label(ranks, len(session.ranks))}: {finding.title}"
        finding.facts = {**finding.facts, "ranks": ranks}
        findings.append(finding)
    return Diagnosis(facts=facts, findings=with_crash(session, one_per_cause(findings)),
                     rule_errors=[*ruleset.errors, *broken_rules(ruleset)])


def _provisional(ruleset: RuleSet, facts: dict[str, Any], device_kind: str | None,
                 confirmed: list[Finding]) -> list[Finding]:
    from .engine import evaluate

    steps = facts.get("steady_steps")
    if not isinstance(steps, int) or steps < PROVISIONAL_MIN_STEPS:
        return []
    enough = dict(facts)
    for name in STEP_COUNT_FACTS:
        if isinstance(enough.get(name), int):
            enough[name] = 10**9
    seen = {f.key for f in confirmed}
    early = [f for f in evaluate(ruleset, enough, device_kind) if f.key not in seen]
    for finding in early:
        finding.provisional = True
        finding.facts = {**finding.facts, **{n: facts[n] for n in STEP_COUNT_FACTS if n in finding.facts}}
    return early


CROSS_RANK_FACT = "rank_count"
"""Rules whose condition uses this fact compare ranks; every other rule is judged per rank."""


def _ranks_label(ranks: list[int], world: int) -> str:
    if len(ranks) == world:
        return "all ranks"
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    return "ranks " + ", ".join(str(r) for r in ranks)
