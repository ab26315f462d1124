"""``phrases:``: a fact that is a name (an enum chosen by an analyzer) is written in the rule's
own words, so every sentence a user reads comes from the rule files, not from Python."""

from __future__ import annotations

from pathlib import Path

from mpsprofiler.diagnosis.engine import evaluate
from mpsprofiler.diagnosis.rules import load_rules

RULE = """
rules:
  - id: why-slow
    title: "Slow: {cause_name}"
    severity: warning
    when: "slow"
    evidence: "The steps are slow. {cause_name}. Measured {ms:.1f} ms."
    fix: "Fix it."
    phrases:
      cause_name:
        disk: "The disk is busy ({ms:.0f} ms a read)"
        cpu: "The CPU is busy"
"""


def _ruleset(tmp_path: Path, text: str = RULE):
    path = tmp_path / "rules.yaml"
    path.write_text(text)
    return load_rules([path])


def test_a_phrase_is_the_rules_words_for_the_value(tmp_path: Path) -> None:
    ruleset = _ruleset(tmp_path)
    assert not [e for e in ruleset.errors if e.level == "error"], ruleset.errors
    (finding,) = evaluate(ruleset, {"slow": True, "cause_name": "disk", "ms": 12.34}, "cpu")
    assert finding.title == "Slow: The disk is busy (12 ms a read)"
    assert finding.evidence == "The steps are slow. The disk is busy (12 ms a read). Measured 12.3 ms."


def test_a_value_without_a_phrase_leaves_its_sentence_out(tmp_path: Path) -> None:
    """Never the raw name (``network``) in a user's text, never a hole."""
    (finding,) = evaluate(_ruleset(tmp_path), {"slow": True, "cause_name": "network", "ms": 5.0}, "cpu")
    assert "network" not in finding.evidence and "?" not in finding.evidence
    assert finding.evidence == "The steps are slow. Measured 5.0 ms."


def test_bad_phrases_are_rule_errors(tmp_path: Path) -> None:
    for bad, message in [
        ("    phrases: [a, b]\n", "'phrases' must map fact names"),
        ("    phrases:\n      cause_name: text\n", "must be a mapping of values to texts"),
        ("    phrases:\n      cause_name:\n        disk: \"{x.__class__}\"\n", "phrases of 'cause_name'"),
        ("    phrases:\n      9bad:\n        a: b\n", "is not a fact name"),
    ]:
        text = RULE.split("    phrases:")[0] + bad
        errors = [str(e) for e in _ruleset(tmp_path, text).errors if e.level == "error"]
        assert any(message in e for e in errors), (bad, errors)
