"""What a loaded rule is: :class:`Rule`, the :class:`RuleSet` of a load and its :class:`RuleError` list.

Split from the loader (:mod:`.rules`), which reads and validates rule files; the engine and
the views use only these types, and can read them without the YAML parsing beside them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..devices.kinds import DEVICE_KINDS
from .conditions import Condition
from .template import Template


@dataclass(frozen=True)
class RuleError:
    """A problem in a rule file. ``level`` is ``error`` (the rule or file did not load),
    ``warning`` (it loaded, but look again) or ``note`` (e.g. a rule overridden by id)."""

    path: Path | None
    line: int
    column: int
    message: str
    level: str = "error"

    def __str__(self) -> str:
        prefix = "" if self.level == "error" else f"{self.level}: "
        return f"{self.path or '<rules>'}:{self.line}:{self.column}: {prefix}{self.message}"


@dataclass
class Rule:
    """One loaded, validated rule with its condition and templates compiled."""

    id: str
    title: str
    severity: str
    when: str
    evidence: str
    fix: str
    devices: frozenset[str] = frozenset(DEVICE_KINDS)
    threshold_reason: str | None = None
    references: tuple[str, ...] = ()
    reference_when: dict[str, Condition] = field(default_factory=dict)
    """The references shown only where a condition over the facts holds (``{ref: ..., when:
    ...}`` in the file): those of one variant of the finding; the others are always shown."""
    first_step: str | None = None
    requires: tuple[str, ...] = ()
    enabled: bool = True
    phrases: dict[str, dict[str, Template]] = field(default_factory=dict)
    """``phrases: {fact: {value: text}}``: a fact whose value is a name (an enum the analyzer
    chose) is written in the texts as the rule's own words for that value, so the advice is
    in the rule file, not in Python. A value the table lacks counts as a missing fact."""
    cause: str | None = None
    """Rules naming the same cause are degrees of one problem: only the most severe of them
    that fires is shown (see :func:`~mpsprofiler.diagnosis.findings.one_per_cause`)."""
    source: Path | None = None
    line: int = 0
    column: int = 1
    overrides: str | None = None  # "path:line" of the rule this one replaced
    broken: str | None = None
    """Why evaluating the rule failed for good (a regex out of time): it is skipped."""
    condition: Condition | None = field(default=None, repr=False)
    title_template: Template = field(default=Template("", ()), repr=False)
    evidence_template: Template = field(default=Template("", ()), repr=False)
    fix_template: Template = field(default=Template("", ()), repr=False)

    @property
    def fact_names(self) -> tuple[str, ...]:
        """Facts a finding reports: those of the condition, title and evidence."""
        names: dict[str, None] = {}
        for group in (
            self.condition.names if self.condition else (),
            self.title_template.fields,
            self.evidence_template.fields,
        ):
            for name in group:
                names.setdefault(name)
        return tuple(names)


@dataclass
class RuleSet:
    """Rules by id in load order (later files override earlier ones) plus load problems."""

    rules: list[Rule] = field(default_factory=list)
    errors: list[RuleError] = field(default_factory=list)

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    def get(self, rule_id: str) -> Rule | None:
        return next((r for r in self.rules if r.id == rule_id), None)

    @property
    def ok(self) -> bool:
        """True when no file had an error (warnings and notes do not count)."""
        return not any(e.level == "error" for e in self.errors)

    def add_all(self, rules: Iterable[Rule]) -> None:
        """Add rules in order; an id defined twice in one file is an error (first kept)."""
        index = {r.id: i for i, r in enumerate(self.rules)}
        for rule in rules:
            i = index.get(rule.id)
            if i is None:
                index[rule.id] = len(self.rules)
                self.rules.append(rule)
                continue
            old = self.rules[i]
            if old.source == rule.source:
                self.errors.append(
                    RuleError(rule.source, rule.line, rule.column, f"duplicate rule id '{rule.id}' "
                              f"(first defined at line {old.line}); this one is ignored")
                )  # fmt: skip
                continue
            rule.overrides = f"{old.source}:{old.line}"
            self.rules[i] = rule
            self.errors.append(
                RuleError(rule.source, rule.line, rule.column,
                          f"rule '{rule.id}' overrides the one at {rule.overrides}", "note")
            )  # fmt: skip

    def extend(self, other: RuleSet) -> None:
        self.errors.extend(other.errors)
        self.add_all(other.rules)
