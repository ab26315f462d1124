"""Stable advice (issue 26, item 4): one cause gives one finding, and repeated noisy runs
of one loader get the same num_workers suggestion.

The first half checks the ``cause:`` key: rules that are degrees of one problem (the
dataloader-stall warning and its critical) never both become findings, neither in a
report (``evaluate``) nor in the live view (``FindingTracker``), and a rule file that
declares a cause is validated.
"""

from __future__ import annotations

from pathlib import Path

from mpsprofiler.diagnosis.engine import evaluate
from mpsprofiler.diagnosis.findings import FindingTracker
from mpsprofiler.diagnosis.rules import builtin_rules_dir, load_file, parse_rules_text

TWO_DEGREES = """
rules:
  - id: slow-thing
    cause: slow-thing
    title: "Slow: {share:.0%}"
    severity: warning
    when: share >= 0.15
    threshold_reason: test
    evidence: "{share:.0%} slow"
    fix: fix it
    first_step: first
  - id: slow-thing-critical
    cause: slow-thing
    title: "Very slow: {share:.0%}"
    severity: critical
    when: share >= 0.35
    threshold_reason: test
    evidence: "{share:.0%} slow"
    fix: fix it now
    first_step: first
  - id: other-thing
    title: Other
    severity: warning
    when: share >= 0.15
    threshold_reason: test
    evidence: other
    fix: other fix
"""


def _rules() -> list:
    rules, errors = parse_rules_text(TWO_DEGREES)
    assert not [e for e in errors if e.level == "error"], errors
    return rules


def test_a_critical_and_its_warning_give_one_finding() -> None:
    rules = _rules()
    both = evaluate(rules, {"share": 0.5, "first": 3}, None)
    assert [f.rule for f in both] == ["slow-thing-critical", "other-thing"]
    only_warning = evaluate(rules, {"share": 0.2, "first": 3}, None)
    assert [f.rule for f in only_warning] == ["slow-thing", "other-thing"]
    # a rule without a cause is its own cause: it is never folded into another
    assert {f.key for f in both} == {"slow-thing", "other-thing"}


def test_live_tracker_replaces_the_warning_with_the_critical_and_back() -> None:
    rules = _rules()
    tracker = FindingTracker()
    tracker.update(evaluate(rules, {"share": 0.2, "first": 10}, None))
    assert [f.rule for f in tracker.findings] == ["slow-thing", "other-thing"]
    # both rules fire in one evaluation, even when handed to the tracker unreduced
    warning, critical = (evaluate([r], {"share": 0.5, "first": 12}, None)[0] for r in rules[:2])
    assert tracker.update([warning, critical]) == []  # not a new problem: the same cause
    shown = tracker.findings
    assert [f.rule for f in shown] == ["slow-thing-critical", "other-thing"]
    assert shown[0].first_step == 10 and shown[0].count == 2
    assert tracker.active == {"slow-thing-critical"}
    tracker.update(evaluate(rules, {"share": 0.2, "first": 20}, None))  # drops back
    stall = [f for f in tracker.findings if f.key == "slow-thing"]
    assert [(f.rule, f.severity, f.first_step) for f in stall] == [("slow-thing", "warning", 10)]
    assert len(tracker) == 2


def test_provisional_degree_is_confirmed_by_the_other() -> None:
    """A provisional critical that replaces a confirmed warning stays confirmed: the cause
    was proven already, only its degree changed."""
    rules = _rules()
    tracker = FindingTracker()
    tracker.update(evaluate(rules, {"share": 0.2, "first": 1}, None))
    early = evaluate(rules, {"share": 0.5, "first": 1}, None)
    for f in early:
        f.provisional = True
    tracker.update(early)
    stall = next(f for f in tracker.findings if f.key == "slow-thing")
    assert stall.rule == "slow-thing-critical" and not stall.provisional


def test_a_cause_is_validated() -> None:
    bad = TWO_DEGREES.replace("cause: slow-thing\n    title: \"Very", "cause: Slow Thing\n    title: \"Very")
    rules, errors = parse_rules_text(bad)
    assert [r.id for r in rules] == ["slow-thing", "other-thing"]
    assert any("cause 'Slow Thing' must be kebab-case" in e.message for e in errors)
    typo = TWO_DEGREES.replace("cause: slow-thing\n    title: \"Slow", "cuase: slow-thing\n    title: \"Slow")
    _, errors = parse_rules_text(typo)
    assert any("unknown key 'cuase'" in e.message and "cause" in e.message for e in errors)


def test_the_shipped_stall_rules_are_one_cause() -> None:
    ruleset = load_file(Path(builtin_rules_dir()) / "dataloader-stall.yaml")
    assert ruleset.ok, ruleset.errors
    causes = {r.id: r.cause for r in ruleset}
    assert causes["dataloader-stall"] == causes["dataloader-stall-critical"] == "dataloader-stall"
