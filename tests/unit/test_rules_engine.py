"""Rule engine: loading and validating rule files, conditions, templates, findings, CLI."""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mpsprofiler import rules_cli
from mpsprofiler.diagnosis import rules as rules_mod
from mpsprofiler.diagnosis.conditions import ConditionError, compile_condition
from mpsprofiler.diagnosis.engine import Diagnostic, evaluate
from mpsprofiler.diagnosis.findings import SEVERITY_ORDER, Finding, FindingTracker, sort_findings
from mpsprofiler.diagnosis.rules import (
    MAX_FILE_BYTES,
    RuleSet,
    builtin_rules_dir,
    check_file,
    load_builtin_and_user,
    load_rules,
    parse_rules_text,
)
from mpsprofiler.diagnosis.template import TemplateError, compile_template, render_template

FIXTURES = Path(__file__).parent.parent / "fixtures" / "rules"
BROKEN = FIXTURES / "broken"
VALID = FIXTURES / "valid.yaml"

FACTS = {
    "data_wait_share": 0.3,
    "steady_steps": 40,
    "data_wait_ms": 12.34,
    "step_ms": 41.0,
    "first_step": 3,
    "last_step": 90,
    "suggested_num_workers": 4,
    "first_stall_step": 5.0,
    "fallback_count": 2,
    "fallback_ops": ["aten::linalg_svd", "aten::col2im"],
    "last_error": "Cannot convert a MPS Tensor to float64 dtype",
}


def rule_yaml(rule_id: str = "r", when: str = "x > 0", **extra: str) -> str:
    lines = [
        "rules:",
        f"  - id: {rule_id}",
        '    title: "T"',
        "    severity: info",
        f"    when: {json.dumps(when)}",
        '    evidence: "x is {x}"',
        '    fix: "f"',
    ]
    lines += [f"    {k}: {v}" for k, v in extra.items()]
    return "\n".join(lines) + "\n"


def one_rule(when: str) -> RuleSet:
    rules, errors = parse_rules_text(rule_yaml(when=when, threshold_reason="t").encode())
    assert [e for e in errors if e.level == "error"] == [], errors
    return RuleSet(rules)


# --------------------------------------------------------------------------- valid rules


def test_valid_rules_load_and_fire_with_rendered_text() -> None:
    ruleset = load_rules([VALID])
    assert ruleset.ok
    assert [r.id for r in ruleset] == ["dataloader-stall", "mps-fallback-ops", "float64-input"]
    found = {f.rule: f for f in evaluate(ruleset, FACTS, "mps")}
    stall = found["dataloader-stall"]
    assert stall.evidence == (
        "30% of each step waits for data (12.3 ms of 41.0 ms), over steps 3-90."
    )
    assert "num_workers=4, persistent_workers=True)" in stall.fix
    assert "batch = {k: v.to(device) for k, v in batch.items()}" in stall.fix  # {{ }} survive
    assert stall.fix.count("```") == 2
    assert stall.first_step == 5
    assert stall.severity == "warning"
    assert stall.references == ["https://pytorch.org/docs/stable/data.html#multi-process-data-loading"]
    assert stall.facts["data_wait_share"] == 0.3 and stall.facts["steady_steps"] == 40
    assert found["mps-fallback-ops"].title == "2 ops fall back to the CPU"
    assert found["mps-fallback-ops"].evidence == "Fallback ops: aten::linalg_svd, aten::col2im."
    assert found["float64-input"].evidence == "Last error: 'Cannot convert a MPS Tensor to float64 dtype'"


def test_findings_are_sorted_most_severe_first() -> None:
    findings = evaluate(load_rules([VALID]), FACTS, "mps")
    assert [f.severity for f in findings] == ["critical", "warning", "info"]
    assert SEVERITY_ORDER["critical"] > SEVERITY_ORDER["warning"] > SEVERITY_ORDER["info"]


def test_device_filter() -> None:
    ruleset = load_rules([VALID])
    assert "mps-fallback-ops" not in {f.rule for f in evaluate(ruleset, FACTS, "cpu")}
    assert "mps-fallback-ops" in {f.rule for f in evaluate(ruleset, FACTS, "mps:0")}
    assert len(evaluate(ruleset, FACTS, None)) == 3  # None: every device
    assert evaluate(ruleset, FACTS, "xpu") == []


def test_threshold_not_reached_does_not_fire() -> None:
    facts = dict(FACTS, data_wait_share=0.05)
    assert "dataloader-stall" not in {f.rule for f in evaluate(load_rules([VALID]), facts, "cpu")}


# --------------------------------------------------------------------------- missing / None


def test_missing_fact_does_not_fire_and_is_diagnosed() -> None:
    diags: list[Diagnostic] = []
    assert evaluate(one_rule("x > 0 and y > 1"), {"x": 1}, "cpu", diagnostics=diags) == []
    assert diags == [Diagnostic("r", "missing", "fact 'y' is absent")]


def test_none_comparison_is_not_matched_and_counted() -> None:
    diags: list[Diagnostic] = []
    assert evaluate(one_rule("x > 0.15"), {"x": None}, "cpu", diagnostics=diags) == []
    assert [d.kind for d in diags] == ["type-error"]
    # Explicit guards work; a text whose only sentence needs the missing fact says so.
    found = evaluate(one_rule("x is None or x > 0.15"), {"x": None}, "cpu")
    assert found[0].evidence == "x is (not measured)"


def test_requires_skips_rule_when_fact_is_none() -> None:
    rules, errors = parse_rules_text(rule_yaml(requires="[x]").encode())
    diags: list[Diagnostic] = []
    assert evaluate(RuleSet(rules), {"x": None}, "cpu", diagnostics=diags) == []
    assert diags[0].kind == "skipped"
    assert len(evaluate(RuleSet(rules), {"x": 2}, "cpu")) == 1


@pytest.mark.parametrize(
    ("when", "facts", "fires"),
    [
        ("contains(ops, 'aten::col2im')", {"ops": ["aten::col2im"]}, True),
        ("'aten::col2im' in ops", {"ops": ["aten::mm"]}, False),
        ("startswith(name, ['Apple', 'Intel'])", {"name": "Apple M2"}, True),
        ("matches('M[0-9] (Pro|Max)', name)", {"name": "Apple M3 Max"}, True),
        ("len(ops) >= 2 and max(a, b) > 3 and abs(c) == 1", {"ops": ["x", "y"], "a": 1, "b": 4, "c": -1}, True),
        ("round(x, 1) == 0.3 and any(flags) and not all(flags)", {"x": 0.31, "flags": [True, False]}, True),
        ("device_kind in ['mps', 'cuda']", {"device_kind": "cpu"}, False),
        ("0.1 < x <= 0.5", {"x": 0.5}, True),
        ("x / y > 1", {"x": 1, "y": 0}, False),
        ("contains(ops, 'a')", {"ops": None}, False),
    ],
)
def test_condition_language(when: str, facts: dict, fires: bool) -> None:
    assert bool(evaluate(one_rule(when), facts, "cpu")) is fires


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("name", "line", "column", "text"),
    [
        ("yaml_syntax.yaml", 4, 4, "YAML: expected <block end>"),
        ("missing_key.yaml", 9, 5, "rule 'no-fix' is missing required key 'fix'"),
        ("unknown_key.yaml", 6, 5, "unknown key 'evidance'; did you mean 'evidence'?"),
        ("bad_values.yaml", 2, 9, "must be kebab-case"),
        ("bad_values.yaml", 4, 15, "did you mean 'warning'?"),
        ("bad_values.yaml", 5, 20, "unknown device 'gpu'"),
        ("bad_when.yaml", 5, 16, "when: syntax error"),
        ("bad_when.yaml", 11, 12, "attribute access is not allowed"),
        ("bad_when.yaml", 17, 12, "attribute access is not allowed"),
        ("bad_when.yaml", 23, 12, "lambdas are not allowed"),
        ("bad_when.yaml", 29, 16, "comprehensions are not allowed"),
        ("bad_when.yaml", 35, 12, "bad regex"),
        ("bad_template.yaml", 6, 22, "attribute and index access are not allowed"),
        ("bad_template.yaml", 16, 15, "write '{{' and '}}' for literal braces"),
        ("bad_template.yaml", 19, 15, "bad field {names[0]}"),
        ("duplicate_ids.yaml", 8, 5, "duplicate rule id 'same'"),
        ("not_mapping.yaml", 1, 1, "top level must be a mapping"),
        ("empty.yaml", 1, 1, "empty file"),
        ("billion_laughs.yaml", 2, 8, "aliases"),
    ],
)
def test_validation_errors_point_at_the_line(name: str, line: int, column: int, text: str) -> None:
    errors = check_file(BROKEN / name)
    hits = [e for e in errors if text in e.message and (e.line, e.column) == (line, column)]
    assert hits, errors
    assert hits[0].level == "error"
    assert str(hits[0]).startswith(f"{BROKEN / name}:{line}:{column}: ")


def test_good_rules_in_a_partly_broken_file_still_load() -> None:
    ruleset = load_rules([BROKEN / "missing_key.yaml", VALID])
    assert not ruleset.ok
    assert {"ok-rule", "dataloader-stall"} <= {r.id for r in ruleset}


def test_misspelt_key_is_not_also_reported_missing() -> None:
    messages = [e.message for e in check_file(BROKEN / "unknown_key.yaml")]
    assert not any("missing required" in m for m in messages)


def test_threshold_without_reason_is_a_warning() -> None:
    rules, errors = parse_rules_text(rule_yaml(when="x > 0.15").encode())
    assert len(rules) == 1
    assert [e.level for e in errors] == ["warning"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("rules:\n  - id: x\n    title: yes\n", "'title' must be text, not true/false"),
        ("rules: 3\n", "'rules' must be a list"),
        ("other: []\n", "missing top-level 'rules:'"),
        ("rules: []\nrulez: []\n", "did you mean 'rules'?"),
        ("rules: []\n---\nrules: []\n", "single document"),
        ("rules:\n  - just-a-string\n", "must be a mapping"),
        ("rules:\n  - id: a\x07b\n", "unacceptable character"),
        ("rules:\n  - id: x\n    id: y\n", "duplicate key 'id'"),
        ("rules:\n  - id: x\n    devices: []\n", "would never apply"),
        ("rules:\n  - !!python/object:os.system {}\n", "missing required keys"),
    ],
)
def test_structural_errors(text: str, expected: str) -> None:
    _, errors = parse_rules_text(text.encode())
    assert any(expected in e.message for e in errors), errors


def test_non_utf8_file(tmp_path: Path) -> None:
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes("rules:\n  - id: caf\u00e9\n".encode("latin-1"))
    (err,) = check_file(bad)
    assert (err.line, err.column) == (2, 12) and "not UTF-8" in err.message


def test_missing_file_and_directory_loading(tmp_path: Path) -> None:
    assert "no such file" in check_file(tmp_path / "nope.yaml")[0].message
    (tmp_path / "b.yaml").write_text(rule_yaml("second"))
    (tmp_path / "a.yml").write_text(rule_yaml("first"))
    (tmp_path / "notes.md").write_text("not a rule file")
    (tmp_path / ".hidden.yaml").write_text("garbage: [")
    ruleset = load_rules([tmp_path, tmp_path / "a.yml"])  # a.yml twice: loaded once
    assert [r.id for r in ruleset] == ["first", "second"]
    assert ruleset.ok and not ruleset.errors


# --------------------------------------------------------------------------- overrides


def test_duplicate_id_in_one_file_keeps_the_first() -> None:
    ruleset = load_rules([BROKEN / "duplicate_ids.yaml"])
    assert [r.title for r in ruleset] == ["first"]


def test_user_rule_overrides_builtin_by_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    builtin = tmp_path / "builtin"
    builtin.mkdir()
    (builtin / "data.yaml").write_text(VALID.read_text())
    monkeypatch.setattr(rules_mod, "builtin_rules_dir", lambda: builtin)
    ruleset = load_builtin_and_user([FIXTURES / "override.yaml"])
    assert ruleset.ok
    stall = ruleset.get("dataloader-stall")
    assert stall is not None and stall.severity == "critical" and stall.overrides
    assert [r.id for r in ruleset] == ["dataloader-stall", "mps-fallback-ops", "float64-input"]
    notes = [e for e in ruleset.errors if e.level == "note"]
    assert len(notes) == 2 and "overrides" in notes[0].message
    found = {f.rule: f for f in evaluate(ruleset, FACTS, "mps")}
    assert "float64-input" not in found  # switched off by `enabled: false`
    assert "dataloader-stall" not in found  # user threshold is 0.5
    found = {f.rule for f in evaluate(ruleset, dict(FACTS, data_wait_share=0.6), "mps")}
    assert "dataloader-stall" in found


def test_builtin_rules_dir_and_loading_never_raise() -> None:
    assert builtin_rules_dir().name in ("rules", "_rules")
    assert isinstance(load_builtin_and_user([]), RuleSet)


# --------------------------------------------------------------------------- hostile input


@pytest.mark.parametrize(
    "when",
    ["__import__('os')", "().__class__", "x.__class__.__bases__", "open('/etc/passwd')",
     "eval('1')", "(lambda: 1)()", "[o for o in ops]", "{'a': 1}", "f'{x}'", "(y := 1)",
     "_secret > 0", "len", "b'x' == x", "round(x, ndigits=2)", "matches(pattern, x)"],
)  # fmt: skip
def test_disallowed_conditions_are_rejected_at_load(when: str) -> None:
    with pytest.raises(ConditionError):
        compile_condition(when)
    _, errors = parse_rules_text(rule_yaml(when=when).encode())
    assert any(e.level == "error" and e.message.startswith("when:") for e in errors)


@pytest.mark.parametrize(
    "when",
    ["9**9**9 > 0", "x ** 99999 > 0", "'a' * 10**9 == x", "[1] * 10**8 == x",
     "round(x, -9**9) == 0", "'%999999999d' % x == ''"],
)  # fmt: skip
def test_expensive_conditions_fail_fast_at_evaluation(when: str) -> None:
    ruleset = one_rule(when)
    diags: list[Diagnostic] = []
    start = time.perf_counter()
    assert evaluate(ruleset, {"x": 7}, "cpu", diagnostics=diags) == []
    assert time.perf_counter() - start < 0.5
    assert len(diags) == 1 and diags[0].kind in ("error", "type-error")


def test_large_and_deep_files_are_refused_quickly(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_bytes(b"rules: []\n" + b"#" * (2 * MAX_FILE_BYTES))
    start = time.perf_counter()
    (err,) = check_file(big)
    assert "larger than" in err.message
    _, errors = parse_rules_text("rules: " + "[" * 100_000 + "]" * 100_000)
    assert "nested deeper" in errors[0].message
    start = time.perf_counter()
    check_file(BROKEN / "billion_laughs.yaml")
    assert time.perf_counter() - start < 2.0


# --------------------------------------------------------------------------- templates


def test_template_rendering() -> None:
    facts = {"share": 0.256, "ms": 3.14159, "name": "mps", "ops": ["a", "b"], "n": None, "big": 1234567}
    t = compile_template("{share:.0%} {ms:.1f} {name!r} {ops} {n:.1f} {missing} {big:,} {{x}}")
    assert t.render(facts) == "26% 3.1 'mps' a, b (not measured) (not measured) 1,234,567 {x}"
    assert t.fields == ("share", "ms", "name", "ops", "n", "missing", "big")
    assert compile_template("{name:.1f}").render({"name": "text"}) == "text"  # spec mismatch
    assert render_template("{x", {"x": 1}) == "{x"  # the one-shot helper never raises


def test_a_code_block_whose_every_line_needs_a_missing_fact_is_left_out() -> None:
    """A sentence with a missing fact is left out, and in a code block each line is one; a
    block left with its fences only used to show as an empty snippet under the fix."""
    t = compile_template("Measure again. Set {n} threads:\n\n```python\n{code}\n```\n\nThen run again.")
    assert t.render({}) == "Measure again.\n\nThen run again."
    assert t.render({"n": 2, "code": "torch.set_num_threads(2)"}) == (
        "Measure again. Set 2 threads:\n\n```python\ntorch.set_num_threads(2)\n```\n\nThen run again.")
    kept = compile_template("Keep:\n\n```python\nimport torch\n{code}\n```\n")
    assert kept.render({}) == "Keep:\n\n```python\nimport torch\n```\n"  # a line without a hole stays


@pytest.mark.parametrize(
    ("text", "offset"),
    [("a {b.c}", 2), ("{x[0]}", 0), ("ab {}", 3), ("{0}", 0), ("x {y:{w}}", 2), ("{y!a}", 0),
     ("{ x }", 0), ("{x:99999999}", 0), ("ok } no", 3), ("{{ {", 3), ("{{x}} {x:abc}", 6)],
)  # fmt: skip
def test_bad_templates_are_rejected_with_offset(text: str, offset: int) -> None:
    with pytest.raises(TemplateError) as info:
        compile_template(text)
    assert info.value.offset == offset


# --------------------------------------------------------------------------- findings


def test_finding_round_trip_and_tolerant_reader() -> None:
    f = Finding("r", "warning", "T", "E", "F", first_step=3, references=["u"], facts={"x": 1}, count=2)
    assert Finding.from_dict(json.loads(json.dumps(f.to_dict()))) == f
    old = Finding.from_dict({"rule": "r", "first_step": "later", "count": "x"})
    assert old.first_step is None and old.count == 1 and old.severity == "info"


def test_sort_findings_puts_unknown_steps_last() -> None:
    a = Finding("a", "warning", "", "", "", first_step=None)
    b = Finding("b", "warning", "", "", "", first_step=10)
    c = Finding("c", "critical", "", "", "", first_step=50)
    assert [f.rule for f in sort_findings([a, b, c])] == ["c", "b", "a"]


def test_tracker_merges_by_rule() -> None:
    ruleset = load_rules([VALID])
    tracker = FindingTracker()
    new = tracker.update(evaluate(ruleset, dict(FACTS, first_stall_step=12), "mps"))
    assert {f.rule for f in new} == {"dataloader-stall", "mps-fallback-ops", "float64-input"}
    facts = dict(FACTS, first_stall_step=30, data_wait_share=0.5, last_error=None)
    assert tracker.update(evaluate(ruleset, facts, "mps")) == []
    stall = next(f for f in tracker.findings if f.rule == "dataloader-stall")
    assert stall.first_step == 12 and stall.count == 2
    assert stall.evidence.startswith("50% of each step")
    assert "float64-input" not in tracker.active and len(tracker) == 3
    assert tracker.evaluations == 2 and len(tracker.to_dicts()) == 3


def test_tracker_drops_a_provisional_finding_that_no_longer_fires() -> None:
    """A provisional finding stands for the evidence so far: once it stops firing it leaves
    the live view; a confirmed one stays (test above)."""
    ruleset = load_rules([VALID])
    tracker = FindingTracker()
    early = evaluate(ruleset, dict(FACTS, first_stall_step=12), "mps")
    for f in early:
        f.provisional = True
    tracker.update(early)
    later = evaluate(ruleset, dict(FACTS, first_stall_step=30, data_wait_share=0.5, last_error=None), "mps")
    assert "float64-input" not in {f.rule for f in later}
    tracker.update(later)
    shown = {f.rule: f for f in tracker.findings}
    assert "float64-input" not in shown and set(shown) == {f.rule for f in later}
    assert not shown["dataloader-stall"].provisional  # confirmed now, so it stays from here on


def test_evaluation_parses_nothing_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rules are evaluated again at every live refresh of the TUI: their conditions and
    templates are parsed once, when the file loads, and each evaluation runs the parsed forms
    (simpleeval's ``previously_parsed``). Counted, not timed: a timed bound measured the
    machine's load as much as the engine."""
    import ast

    from mpsprofiler.diagnosis import conditions, template

    ruleset = RuleSet(list(load_rules([VALID])) * 10)  # 30 rules, all firing
    first = evaluate(ruleset, FACTS, "mps")
    calls: list[str] = []
    real_parse = ast.parse
    monkeypatch.setattr(ast, "parse", lambda *a, **k: calls.append("ast.parse") or real_parse(*a, **k))
    monkeypatch.setattr(conditions, "compile_condition", lambda *a, **k: calls.append("condition") or None)
    monkeypatch.setattr(template, "compile_template", lambda *a, **k: calls.append("template") or None)
    for _ in range(5):
        again = evaluate(ruleset, FACTS, "mps")
    assert calls == [], calls
    assert first and [f.rule for f in again] == [f.rule for f in first]


# --------------------------------------------------------------------------- fuzzing

_FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_KEYS = st.sampled_from(["id", "title", "severity", "when", "evidence", "fix", "devices",
                         "requires", "first_step", "enabled", "evidance", "rules"])  # fmt: skip
_SCALARS = st.one_of(st.text(max_size=30), st.sampled_from(["x > 0", "{x:.1f}", "mps", "info", "[a]", "*a", "&a x"]))
_FACT_VALUES = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True),
                         st.text(max_size=20), st.lists(st.text(max_size=5), max_size=3))  # fmt: skip


@_FUZZ
@given(st.one_of(st.binary(max_size=400), st.text(max_size=400).map(str.encode)))
def test_fuzz_loader_bytes(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.yaml"
        path.write_bytes(data)
        ruleset = load_rules([Path(tmp)])
    assert isinstance(ruleset, RuleSet)
    assert not any("internal error" in e.message for e in ruleset.errors)


@_FUZZ
@given(st.lists(st.dictionaries(_KEYS, _SCALARS, max_size=8), max_size=3))
def test_fuzz_loader_structured(items: list[dict[str, str]]) -> None:
    text = "rules:\n" + "".join(
        "  -" + ("".join(f"\n    {k}: {json.dumps(v)}" for k, v in item.items()) or " {}") + "\n"
        for item in items
    )
    rules, errors = parse_rules_text(text)
    for rule in rules:  # whatever loads must evaluate and render without raising
        evaluate(RuleSet([rule]), {"x": 1}, None, diagnostics=[])


@_FUZZ
@given(st.text(max_size=60), st.dictionaries(st.sampled_from(["x", "y", "a"]), _FACT_VALUES))
def test_fuzz_templates(text: str, facts: dict) -> None:
    try:
        template = compile_template(text)
    except TemplateError:
        return
    assert isinstance(template.render(facts), str)


@_FUZZ
@given(
    st.one_of(st.text(max_size=40), st.text(alphabet="xya0123 +-*/%<>=()[],.'notandisr", max_size=40)),
    st.dictionaries(st.sampled_from(["x", "y", "a"]), _FACT_VALUES),
)
def test_fuzz_conditions(text: str, facts: dict) -> None:
    try:
        rules, _ = parse_rules_text(rule_yaml(when=text).encode())
    except Exception as exc:  # pragma: no cover - the loader must never raise
        pytest.fail(f"loader raised {exc!r}")
    evaluate(RuleSet(rules), facts, "cpu", diagnostics=[])


# --------------------------------------------------------------------------- CLI


def run_cli(argv: list[str]) -> int:
    """Through the names the main CLI imports from ``mpsprofiler.rules_cli``."""
    parser = argparse.ArgumentParser(prog="mpsprof rules")
    rules_cli.add_rules_arguments(parser)
    return rules_cli.main_rules(parser.parse_args(argv))


def test_cli_check_valid_file(capsys: pytest.CaptureFixture[str]) -> None:
    """Valid, and its made-up facts (this engine's fixture: no analyzer provides them) are
    named as warnings, which leave the exit status 0."""
    assert run_cli(["check", str(VALID)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "ok: 3 rules"
    assert all(": warning: rule '" in line and "a fact no analyzer provides" in line for line in lines[:-1]), lines
    assert f"{VALID}:20:5: warning: rule 'mps-fallback-ops' reads 'fallback_count', a fact no analyzer provides " \
           "(did you mean 'mps_fallback_count'?): the rule can never fire" in lines


def test_cli_check_names_a_misspelt_fact_in_a_condition_a_text_and_a_phrase(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    rule = tmp_path / "mine.yaml"
    rule.write_text("rules:\n  - id: mine\n    title: \"slow: {step_ms:.1f} ms\"\n    severity: info\n"
                    "    when: \"step_ms > 1 and data_wait_shares > 0.2\"\n    threshold_reason: \"mine\"\n"
                    "    evidence: \"{step_msx} ms, {why}\"\n    fix: \"less\"\n"
                    "    phrases:\n      why:\n        a: \"because\"\n")
    assert run_cli(["check", str(rule)]) == 0
    out = capsys.readouterr().out
    assert (f"{rule}:2:5: warning: rule 'mine' reads 'data_wait_shares', a fact no analyzer provides (did you mean "
            "'data_wait_share'?): the rule can never fire") in out, out
    assert "reads 'step_msx', a fact no analyzer provides (did you mean 'step_ms'?): its text reads" in out
    assert "reads 'why', a fact no analyzer provides" in out
    assert "reads 'step_ms'" not in out


def test_cli_check_broken_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["check", str(BROKEN / "bad_values.yaml")]) == 1
    out = capsys.readouterr().out
    assert f"{BROKEN / 'bad_values.yaml'}:4:15: severity 'warn'" in out
    assert "3 errors" in out


def test_cli_check_with_facts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps({"facts": {k: v for k, v in FACTS.items() if k != "last_error"}}))
    assert run_cli(["check", str(VALID), "--facts", str(facts), "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "fires: dataloader-stall [warning]" in out
    assert "30% of each step waits" in out
    assert "fires: mps-fallback-ops" not in out  # mps only
    assert "not evaluated: float64-input: missing: fact 'last_error' is absent" in out
    facts.write_text("[1, 2]")
    assert run_cli(["check", str(VALID), "--facts", str(facts)]) == 2


def test_cli_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    builtin = tmp_path / "builtin"
    builtin.mkdir()
    (builtin / "data.yaml").write_text(VALID.read_text())
    monkeypatch.setattr(rules_mod, "builtin_rules_dir", lambda: builtin)
    assert run_cli(["--rules", str(FIXTURES / "override.yaml")]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^mps-fallback-ops +critical +mps", out, re.M)
    assert "override.yaml" in out and "(replaces a builtin rule)" in out and "disabled" in out
    assert run_cli(["list", "--rules", str(BROKEN / "bad_values.yaml")]) == 1
    assert "bad_values.yaml:4:15" in capsys.readouterr().err


def test_device_kinds_come_from_the_devices_registry(capsys: pytest.CaptureFixture[str]) -> None:
    """Rules, the engine and ``mpsprof rules`` read devices/kinds.py instead of a list of their own."""
    from mpsprofiler.devices import backend_for
    from mpsprofiler.devices.kinds import DEVICE_KINDS, KINDS, label

    (rule,), _ = parse_rules_text(rule_yaml(threshold_reason="t").encode())
    assert rule.devices == frozenset(DEVICE_KINDS)
    _, errors = parse_rules_text(rule_yaml(threshold_reason="t", devices="[quantum]").encode())
    assert any(f"use {', '.join(DEVICE_KINDS)}" in e.message for e in errors)
    assert [label(k.name) for k in KINDS] == [k.label for k in KINDS] and label("mps:0") == "MPS"
    assert backend_for("cpu").kind == "cpu" and backend_for("no-such-device").kind == "cpu"
    with pytest.raises(SystemExit):
        run_cli(["check", "--device", "quantum"])
    assert "{" + ",".join(DEVICE_KINDS) + "}" in capsys.readouterr().err


def test_the_fast_composer_reads_every_file_as_the_checked_loader_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """libyaml composes the rule files (every run's diagnosis parses them): the shipped
    files and each broken one give the same rules and the same errors, at the same lines,
    as the checked pure-Python loader alone; an alias, a control character or a YAML error
    is left to that loader (its messages are the ones users see)."""
    files = sorted(builtin_rules_dir().glob("*.yaml")) + sorted(BROKEN.glob("*.yaml"))
    fast = {f.name + str(f.parent): repr(parse_rules_text(f.read_bytes(), f)) for f in files}
    monkeypatch.setattr(rules_mod, "_compose_fast", lambda text: rules_mod._CHECKED_WAY)
    checked = {f.name + str(f.parent): repr(parse_rules_text(f.read_bytes(), f)) for f in files}
    assert len(files) > 30 and fast == checked
    monkeypatch.undo()
    laughs = (BROKEN / "billion_laughs.yaml").read_text()
    assert rules_mod._compose_fast(laughs) is rules_mod._CHECKED_WAY
    assert rules_mod._compose_fast("rules: [\x07]") is rules_mod._CHECKED_WAY
    # libyaml's composer recurses in C: a file nested 100,000 deep never reaches it
    assert rules_mod._compose_fast("rules: " + "[" * 100_000) is rules_mod._CHECKED_WAY
    assert rules_mod._compose_fast((builtin_rules_dir() / "dataloader-stall.yaml").read_text()) is not rules_mod._CHECKED_WAY


# --------------------------------------------------------------------------- conditional references


def test_a_reference_with_a_condition_is_shown_only_where_it_holds() -> None:
    """``{ref: ..., when: ...}``: the source of one variant of a finding (the phrase a fact
    chose) is listed with that variant only; a plain text is listed always. A missing fact
    (or a broken condition) hides the reference, never the finding."""
    text = rule_yaml(references='["https://a", {ref: "https://b", when: "kind == \'b\'"}]')
    rules, errors = parse_rules_text(text)
    assert not [e for e in errors if e.level == "error"], errors
    ruleset = RuleSet(rules)
    assert evaluate(ruleset, {"x": 1, "kind": "b"}, None)[0].references == ["https://a", "https://b"]
    assert evaluate(ruleset, {"x": 1, "kind": "c"}, None)[0].references == ["https://a"]
    assert evaluate(ruleset, {"x": 1}, None)[0].references == ["https://a"]
    _, errors = parse_rules_text(rule_yaml(references='[{ref: "https://b", when: "kind =="}]'))
    assert any("references: when:" in e.message for e in errors), errors
    _, errors = parse_rules_text(rule_yaml(references='[{ref: "https://b", if: "x"}]'))
    assert any("{ref: text, when: condition}" in e.message for e in errors), errors


@pytest.mark.parametrize(("where", "checks", "shown", "hidden"), [
    ("anomaly", "none", ["autograd.html#anomaly-detection"], ["huggingface", "lbfgs", "distributions"]),
    ("trainer_filter_line", "none", ["huggingface.co", "transformers/issues/33693"], ["lbfgs", "distributions"]),
    ("optimizer", "none", ["lbfgs.py"], ["huggingface", "anomaly", "distributions"]),
    ("plain", "distributions", ["set_default_validate_args"], ["huggingface", "lbfgs", "anomaly"]),
    ("distributions", "distributions", ["set_default_validate_args"], ["huggingface", "lbfgs", "anomaly"]),
    ("distributions", "distributions_call", ["set_default_validate_args"], ["huggingface", "lbfgs", "anomaly"]),
])
def test_the_sync_findings_references_follow_the_variant_shown(where: str, checks: str, shown: list[str],
                                                              hidden: list[str]) -> None:
    """The sync finding of anomaly detection's NaN checks listed the Trainer's docs, a
    transformers issue, lbfgs.py and torch.distributions: its other variants' sources."""
    facts = {"syncs_per_step": 15, "syncs_predicted": True, "sync_fix_where": where, "sync_checks": checks}
    for rule, device in (("sync-heavy-mac", "cpu"), ("sync-heavy", "cuda")):
        ruleset = RuleSet([r for r in load_builtin_and_user() if r.id == rule])
        (finding,) = evaluate(ruleset, facts, device)
        refs = " ".join(finding.references)
        assert "tuning_guide.html" in refs, refs
        assert all(s in refs for s in shown) and not any(h in refs for h in hidden), (rule, refs)
