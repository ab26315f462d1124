"""Evaluation of rules over facts: ``evaluate`` turns a rule set and a facts dict into findings.

Whatever a condition does at run time (a missing fact, ``None > 0.1``, a division by zero)
it counts as "not matched" and, when asked, is reported as a :class:`Diagnostic`; nothing
escapes into the training run or the TUI. The condition language itself lives in
:mod:`.conditions`, the loader in :mod:`.rules`, the ``mpsprofiler rules`` command in
:mod:`mpsprofiler.rules_cli`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from simpleeval import EvalWithCompoundTypes, NameNotDefined

from ..devices.kinds import normalize_device
from .conditions import RuleBroken, evaluator
from .findings import Finding, as_step, one_per_cause
from .rules import Rule, RuleError, RuleSet
from .template import BLANK, Template

__all__ = ["Diagnostic", "broken_rules", "evaluate", "normalize_device"]


@dataclass(frozen=True)
class Diagnostic:
    """Why a rule did not fire although it applied: shown by ``rules check --facts``.

    ``kind`` is ``skipped`` (a fact in ``requires`` is absent), ``missing`` (the
    condition names an absent fact), ``type-error`` (e.g. ``None > 0.1``) or ``error``.
    """

    rule: str
    kind: str
    message: str


def evaluate(
    ruleset: RuleSet | Iterable[Rule],
    facts: Mapping[str, Any],
    device_kind: str | None,
    *,
    diagnostics: list[Diagnostic] | None = None,
) -> list[Finding]:
    """Rules that apply to ``device_kind`` and fire on ``facts``, most severe first, one
    per cause (of a warning and a critical rule naming the same ``cause:``, the critical).

    ``device_kind=None`` evaluates every rule regardless of its ``devices``. Never raises.
    """
    kind = normalize_device(device_kind)
    ev = evaluator(facts)
    found: list[Finding] = []
    for rule in ruleset:
        if not rule.enabled or rule.condition is None or rule.broken:
            continue
        if kind is not None and kind not in rule.devices:
            continue
        finding = _evaluate_rule(rule, ev, facts, diagnostics)
        if finding is not None:
            found.append(finding)
    return one_per_cause(found)


def _evaluate_rule(
    rule: Rule, ev: EvalWithCompoundTypes, facts: Mapping[str, Any], diags: list[Diagnostic] | None
) -> Finding | None:
    for name in rule.requires:
        if facts.get(name) is None:
            if diags is not None:
                diags.append(Diagnostic(rule.id, "skipped", f"required fact '{name}' is absent"))
            return None
    assert rule.condition is not None
    try:
        matched = bool(ev.eval(rule.condition.source, previously_parsed=rule.condition.node))
    except NameNotDefined as exc:
        if diags is not None:
            diags.append(Diagnostic(rule.id, "missing", f"fact '{exc.name}' is absent"))
        return None
    except RuleBroken as exc:  # switched off for the rest of the run; diagnose() reports it
        rule.broken = str(exc)
        if diags is not None:
            diags.append(Diagnostic(rule.id, "error", str(exc)))
        return None
    except TypeError as exc:
        if diags is not None:
            diags.append(Diagnostic(rule.id, "type-error", str(exc)))
        return None
    except Exception as exc:  # a rule must never break the run
        if diags is not None:
            diags.append(Diagnostic(rule.id, "error", f"{type(exc).__name__}: {exc}"))
        return None
    if not matched:
        return None
    used = {n: _copy(facts[n]) for n in rule.fact_names if n in facts}
    words = with_phrases(rule, facts)
    return Finding(
        rule=rule.id,
        severity=rule.severity,
        title=rule.title_template.render(words),
        evidence=rule.evidence_template.render(words),
        fix=rule.fix_template.render(words),
        first_step=as_step(facts.get(rule.first_step)) if rule.first_step else None,
        references=_references(rule, ev),
        facts=used,
        cause=rule.cause,
    )


def _references(rule: Rule, ev: EvalWithCompoundTypes) -> list[str]:
    """The rule's references that apply to this finding: each conditional one whose
    condition holds (a missing fact or an error: it does not), and all the others."""
    out = []
    for ref in rule.references:
        cond = rule.reference_when.get(ref)
        if cond is not None:
            try:
                if not ev.eval(cond.source, previously_parsed=cond.node):
                    continue
            except Exception:  # a reference must never break the finding
                continue
        out.append(ref)
    return out


def with_phrases(rule: Rule, facts: Mapping[str, Any]) -> Mapping[str, Any]:
    """The facts as the rule's texts read them: a fact with ``phrases`` is replaced by the
    rule's phrase for its value (rendered with the facts), or by None (its sentence is left
    out) when the rule has no phrase for that value.

    So that a rule file holds whole sentences (plurals, optional clauses), a phrase may use
    other phrased facts (read as their phrases; a fact already being phrased reads as its
    value, so a table cannot loop), a table may give an ``other`` phrase for the values it
    does not list (``"1": "1 worker"``, ``other: "{n} workers"``), a fact whose value is
    a list of names reads as their phrases joined by spaces (a reason and its clauses), and
    a phrase written empty (``""``) reads as no words without leaving its sentence out (an
    optional clause: ``unknown: ""``, ``other: ", {x:.1f} ms of it CPU work"``)."""
    if not rule.phrases:
        return facts
    words = dict(facts)
    for name in rule.phrases:
        words[name] = phrase_for(rule.phrases, facts, name, ())
    return words


PHRASE_DEFAULT = "other"
"""The key of the phrase for a value the table does not list."""


def phrase_for(tables: Mapping[str, Mapping[str, Template]], facts: Mapping[str, Any], name: str,
               stack: tuple[str, ...]) -> str | None:
    """The phrase of fact ``name`` for its value (None: no phrase, its sentence is left out;
    :data:`~.template.BLANK`: a phrase written empty, no words but the sentence stays)."""
    value = facts.get(name)
    table = tables[name]
    values = value if isinstance(value, list) else [value]
    inner = _Phrased(tables, facts, (*stack, name))
    said, blank = [], False
    for item in values:
        if item is None or isinstance(item, (list, dict)):
            continue
        phrase = table.get(str(item), table.get(PHRASE_DEFAULT))
        text = phrase.render(inner) if phrase is not None else ""
        if text:
            said.append(text)
        elif phrase is not None:
            blank = True  # written empty: no words, but its sentence stays
    return " ".join(said) or (BLANK if blank else None)


class _Phrased(Mapping[str, Any]):
    """The facts as a phrase reads them: other phrased facts as their phrases (see
    :func:`with_phrases`), those on ``stack`` (being phrased) as their values."""

    def __init__(self, tables: Mapping[str, Mapping[str, Template]], facts: Mapping[str, Any],
                 stack: tuple[str, ...]) -> None:
        self._tables, self._facts, self._stack = tables, facts, stack

    def __getitem__(self, name: str) -> Any:
        if name in self._tables and name not in self._stack:
            return phrase_for(self._tables, self._facts, name, self._stack)
        return self._facts[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._facts)

    def __len__(self) -> int:
        return len(self._facts)


def _copy(value: Any) -> Any:
    """Findings outlive the facts dict, which the analyzers may keep mutating."""
    return list(value) if isinstance(value, (list, tuple, set)) else value


def broken_rules(ruleset: RuleSet | Iterable[Rule]) -> list[RuleError]:
    """Rule errors for the rules switched off while being evaluated (see :class:`RuleBroken`)."""
    return [RuleError(rule.source, rule.line, rule.column, f"rule '{rule.id}': {rule.broken}")
            for rule in ruleset if rule.broken]
