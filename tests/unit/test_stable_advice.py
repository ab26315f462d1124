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
from tests.unit.test_reason_texts import advice_text, figures_text, reason_text

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


# --------------------------------------------------------------------------- num_workers

import random  # noqa: E402
import re  # noqa: E402

from mpsprofiler.diagnosis.analyzers.loader_advice import stable_workers  # noqa: E402
from tests.unit.test_analyzers import build_session, facts_of, loader, step_rows  # noqa: E402


def _noisy_run(seed: int, n: int = 40) -> dict:
    """One loader (no workers) that waits ~10 ms per batch for I/O (1 ms of CPU) and
    computes ~4 ms, on a machine whose load varies: every figure jitters by up to 25%,
    and a few steps hit a slow read (80 ms) or a slow compute (40 ms)."""
    rnd = random.Random(seed)
    waits, durs = [], []
    for _ in range(n):
        wait = 0.010 * rnd.uniform(0.75, 1.25)
        compute = 0.004 * rnd.uniform(0.75, 1.25)
        roll = rnd.random()
        if roll < 0.06:
            wait = 0.080
        elif roll < 0.12:
            compute = 0.040
        waits.append(wait)
        durs.append(wait + compute)
    rows = step_rows(durs, waits=waits, cpu=[0.001] * n, runq=[0.0] * n)
    return facts_of(build_session(loaders=[loader(len=1000)], rows=rows))


def test_noisy_runs_of_one_loader_get_the_same_suggestion() -> None:
    runs = [_noisy_run(seed) for seed in range(6)]
    assert {f["loader_bound"] for f in runs} == {"waiting"}
    # the means move with the slow steps (the raw count of workers needed varies) ...
    means = {round(f["load_ms"] / f["train_ms"], 1) for f in runs}
    assert len(means) > 1, means
    # ... the suggestion does not
    assert {f["suggested_num_workers"] for f in runs} == {4}, [reason_text(f) for f in runs]
    for f in runs:
        assert advice_text(f) == "try num_workers=4"
        # evidence (loader_figures) and fix (num_workers_reason) quote the same load time
        load = f"{f['load_ms']:.1f} ms"
        assert load in figures_text(f) and load in reason_text(f)
        assert "sized from the median step, which took" in reason_text(f)


def test_a_loader_whose_steps_vary_widely_gets_a_stated_range() -> None:
    # the steps' load-to-compute ratio spread evenly from 1 to 6
    n = 40
    ratios = [1 + 5 * k / (n - 1) for k in range(n)]
    random.Random(1).shuffle(ratios)
    waits = [0.004 * r for r in ratios]
    rows = step_rows([w + 0.004 for w in waits], waits=waits, cpu=[0.0005] * n, runq=[0.0] * n)
    f = facts_of(build_session(loaders=[loader(len=1000)], rows=rows))
    assert f["loader_bound"] == "waiting"
    assert f["num_workers_range"] == "4-8" and f["suggested_num_workers"] == 8
    assert "4-8 workers is the range to try; start with 8" in reason_text(f)
    assert advice_text(f) == "try num_workers=8"


def test_steady_loader_states_no_range() -> None:
    rows = step_rows([0.014] * 30, waits=[0.010] * 30, cpu=[0.001] * 30, runq=[0.0] * 30)
    f = facts_of(build_session(loaders=[loader(len=1000)], rows=rows))
    assert f["num_workers_range"] is None and f["suggested_num_workers"] == 4
    assert not re.search(r"\d-\d workers", reason_text(f))


def test_stable_workers_rounds_up_to_a_power_of_two() -> None:
    assert [stable_workers(n) for n in range(0, 10)] == [1, 1, 2, 4, 4, 8, 8, 8, 8, 16]


def test_the_range_reaches_above_the_suggestion() -> None:
    """A run near a power of two (as repeated real runs of examples/slow_dataloader.py on a
    busy machine are: median ratios 1.4-2.5) starts at the median's count and names the
    next one up, so runs landing on either side still name a common count."""
    n = 40
    ratios = [0.9 + 1.3 * k / (n - 1) for k in range(n)]
    random.Random(2).shuffle(ratios)
    waits = [0.004 * r for r in ratios]
    rows = step_rows([w + 0.004 for w in waits], waits=waits, cpu=[0.0005] * n, runq=[0.0] * n)
    f = facts_of(build_session(loaders=[loader(len=1000)], rows=rows))
    assert f["suggested_num_workers"] == 2 and f["num_workers_range"] == "2-4"
    assert "2-4 workers is the range to try; start with 2" in reason_text(f)


def test_a_rounded_suggestion_is_said_in_the_fix() -> None:
    """needed 7 (10 ms load / 2 ms train, 25% to spare) -> 8: the fix names both, as the title does."""
    rows = step_rows([0.012] * 30, waits=[0.010] * 30, cpu=[0.001] * 30, runq=[0.0] * 30)
    f = facts_of(build_session(loaders=[loader(len=1000)], rows=rows))
    assert f["num_workers_needed"] == 7 and f["suggested_num_workers"] == 8, reason_text(f)
    assert "7 workers keep up" in reason_text(f)
    assert "rounds up to 8 (a power of two)" in reason_text(f)
