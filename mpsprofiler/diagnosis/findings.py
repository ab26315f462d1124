"""The ``Finding``: what a rule that fired tells the user, ready for any view.

A finding is plain data (strings, numbers, lists) so it survives a round trip through
``summary.json`` and can be rendered by the TUI and every report format alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

SEVERITIES: tuple[str, ...] = ("info", "warning", "critical")
"""Valid severities, least severe first."""

SEVERITY_ORDER: dict[str, int] = {name: rank for rank, name in enumerate(SEVERITIES)}
"""Rank of each severity: higher is more severe (info 0, warning 1, critical 2)."""


def severity_rank(severity: str) -> int:
    """Rank of ``severity``; unknown names rank below ``info`` rather than failing."""
    return SEVERITY_ORDER.get(severity, -1)


class _FindingDocCore(TypedDict):
    rule: str
    severity: str
    title: str
    evidence: str
    fix: str
    first_step: int | None
    references: list[str]
    facts: dict[str, Any]
    count: int


class FindingDoc(_FindingDocCore, total=False):
    """A finding as ``summary.json`` stores it (``findings[]`` of docs/report-schema.md);
    ``provisional`` only on a live run's finding not yet confirmed."""

    provisional: bool


@dataclass
class Finding:
    """One diagnosed problem with its evidence and one concrete fix."""

    rule: str
    severity: str
    title: str
    evidence: str
    fix: str
    first_step: int | None = None
    references: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    count: int = 1
    provisional: bool = False
    """Live only: the evidence is clear but the rule's minimum step count is not reached
    yet (see :func:`~mpsprofiler.diagnosis.diagnose`); a run's final findings never are."""
    cause: str | None = None
    """The rule's ``cause:``: findings of one cause are one problem at different degrees
    (a warning and its critical); :func:`one_per_cause` and the tracker keep one of them.
    Not written to ``summary.json``: what is written has already been reduced to one."""

    @property
    def key(self) -> str:
        """What makes two findings the same problem: the cause, else the rule."""
        return self.cause or self.rule

    def to_dict(self) -> FindingDoc:
        doc: FindingDoc = {"provisional": True} if self.provisional else {}  # type: ignore[typeddict-item]
        doc.update({
            "rule": self.rule,
            "severity": self.severity,
            "title": self.title,
            "evidence": self.evidence,
            "fix": self.fix,
            "first_step": self.first_step,
            "references": list(self.references),
            "facts": dict(self.facts),
            "count": self.count,
        })
        return doc

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        """Tolerant reader: recordings from older versions may lack keys."""
        first = data.get("first_step")
        refs = data.get("references") or []
        facts = data.get("facts") or {}
        try:
            count = int(data.get("count", 1))
        except (TypeError, ValueError):
            count = 1
        return cls(
            rule=str(data.get("rule", "")),
            severity=str(data.get("severity", "info")),
            title=str(data.get("title", "")),
            evidence=str(data.get("evidence", "")),
            fix=str(data.get("fix", "")),
            first_step=as_step(first),
            references=[str(r) for r in refs] if isinstance(refs, (list, tuple)) else [],
            facts=dict(facts) if isinstance(facts, Mapping) else {},
            count=max(count, 1),
        )


def as_step(value: Any) -> int | None:
    """A step number from a fact value, or None when the value is not a whole number."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def sort_key(finding: Finding) -> tuple[int, int, int, str]:
    step = finding.first_step
    return (
        -severity_rank(finding.severity),
        0 if step is not None else 1,
        step if step is not None else 0,
        finding.rule,
    )


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Most severe first; then earliest first step (unknown last); then rule id."""
    return sorted(findings, key=sort_key)


def one_per_cause(findings: Iterable[Finding]) -> list[Finding]:
    """The most severe finding of each cause (a confirmed one before a provisional one of
    the same severity), sorted: a stall that is critical is not also shown as a warning."""
    best: dict[str, Finding] = {}
    for f in findings:
        old = best.get(f.key)
        if old is None or _strength(f) > _strength(old):
            best[f.key] = f
    return sort_findings(best.values())


def _strength(finding: Finding) -> tuple[int, int]:
    return (severity_rank(finding.severity), 0 if finding.provisional else 1)


# --------------------------------------------------------------------------- tracking


class FindingTracker:
    """Findings across repeated live evaluations (about once a second), merged by cause
    (:attr:`Finding.key`: the rule's ``cause:``, else its id).

    A merged finding keeps the earliest ``first_step``, shows the latest evidence and
    counts the evaluations that fired it; ``active`` tells which rules fired last time. A
    finding never confirmed (still provisional) is dropped once it stops firing. When a
    live evaluation moves one cause from its warning rule to its critical rule (or back),
    the latest replaces the earlier: one cause is one finding at the degree it has now.
    """

    def __init__(self) -> None:
        self._by_rule: dict[str, Finding] = {}
        self._active: frozenset[str] = frozenset()
        self.evaluations = 0

    def update(self, findings: Iterable[Finding]) -> list[Finding]:
        """Merge one evaluation's findings; returns those seen for the first time."""
        new: list[Finding] = []
        active: set[str] = set()
        keys: set[str] = set()
        for f in one_per_cause(findings):
            active.add(f.rule)
            keys.add(f.key)
            old = self._by_rule.get(f.key)
            if old is None:
                merged = dataclasses.replace(f, references=list(f.references), facts=dict(f.facts))
                self._by_rule[f.key] = merged
                new.append(merged)
                continue
            steps = [s for s in (old.first_step, f.first_step) if s is not None]
            self._by_rule[f.key] = dataclasses.replace(
                f,
                first_step=min(steps) if steps else None,
                references=list(f.references),
                facts=dict(f.facts),
                count=old.count + f.count,
                # once confirmed, it stays so: a cause proven at one degree is proven
                provisional=f.provisional and old.provisional,
            )
        # a provisional finding stands for the evidence so far: once it no longer fires, it
        # no longer holds and leaves the view (a confirmed one stays, as a past problem)
        for key in [k for k, f in self._by_rule.items() if f.provisional and k not in keys]:
            del self._by_rule[key]
        self._active = frozenset(active)
        self.evaluations += 1
        return sort_findings(new)

    @property
    def findings(self) -> list[Finding]:
        return sort_findings(self._by_rule.values())

    @property
    def active(self) -> frozenset[str]:
        """Rule ids that fired in the latest evaluation."""
        return self._active

    def __len__(self) -> int:
        return len(self._by_rule)

    def to_dicts(self) -> list[FindingDoc]:
        return [f.to_dict() for f in self.findings]

    def clear(self) -> None:
        self._by_rule.clear()
        self._active = frozenset()
        self.evaluations = 0
