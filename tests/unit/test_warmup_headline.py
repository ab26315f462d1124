"""The summary's headline counts the warm-up as the long-warmup finding does.

An HF Trainer run on a busy machine (two other busy loops on 2 cores) read "40 (4 warm-up,
...)" in its headline and "The first 3 steps are warm-up" in its finding: its step 3, the
fourth, was slow because mpsprof sampled its ops, which the finding judges as a steady step
and the headline counted as warm-up. These are that run's first step times.
"""

from __future__ import annotations

from mpsprofiler.report.common import summary_rows, warmup_words
from mpsprofiler.session.summary import summarize
from mpsprofiler.tui.chart_series import step_title
from tests.unit.test_analyzers import build_session, facts_of, step_rows

DURS = [3.177, 1.136, 1.170, 1.430, 0.180, 0.258, 0.381, 0.188, 0.381, 0.101, 0.147, 0.180] + [0.18] * 28


def _session(sampled: set[int]):
    session = build_session(rows=step_rows(DURS))
    session.ops.sampled = set(sampled)
    return session


def test_headline_and_finding_count_the_same_warm_up() -> None:
    session = _session({3})
    facts = facts_of(session)
    steps = summarize(session)["steps"]
    assert facts["warmup_steps"] == steps["warmup"] == 3
    # the steady figures still start after the sampled step: it is no steady step either
    assert session.steps.warmup == 4 and steps["steady"] == 36
    assert (steps["warmup_apart"], steps["warmup_apart_sampled"]) == (1, 1)
    assert steps["warmup"] + steps["warmup_apart"] + steps["steady"] == steps["count"]
    assert steps["warmup_cost_s"] == facts["warmup_cost_s"]
    assert warmup_words(steps) == "3 warm-up, 1 slowed by mpsprof's op sampling"
    assert "Step time, ms (after 3 warm-up steps and 1 sampled by mpsprof)" == step_title(session)


def test_without_sampled_steps_the_headline_is_as_before() -> None:
    session = _session(set())
    steps = summarize(session)["steps"]
    assert steps["warmup"] == session.steps.warmup == facts_of(session)["warmup_steps"] == 4
    assert steps["warmup_apart"] == 0
    assert warmup_words(steps) == "4 warm-up"
    assert step_title(session) == "Step time, ms (after 4 warm-up steps)"


def test_the_report_row_says_it() -> None:
    session = _session({3})
    rows = dict(summary_rows(summarize(session), session))
    assert rows["Steps"].startswith("40 (3 warm-up, 1 slowed by mpsprof's op sampling, 36 steady)")


def test_steps_between_the_warm_up_and_the_steady_ones_are_said_as_such() -> None:
    """A Trainer on a machine whose load came and went (slow steps 10 and 11): the warm-up
    ends at step 5, the steady steps start at 10 (the cap, a third of the steps). The steps
    between are no warm-up and no steady steps; one of them was sampled."""
    durs = [1.717, 1.508, 1.137, 0.588, 0.076, 0.171, 0.057, 0.130, 0.065, 0.051, 1.314, 1.156, 0.138] + [0.042] * 17
    session = build_session(rows=step_rows(durs))
    session.ops.sampled = {3, 5, 12, 19}
    steps = summarize(session)["steps"]
    assert (steps["warmup"], steps["warmup_apart"], steps["warmup_apart_sampled"], steps["steady"]) == (5, 5, 1, 20)
    assert facts_of(session)["warmup_steps"] == 5
    assert warmup_words(steps) == "5 warm-up, 5 more before the steady ones (1 slowed by mpsprof's op sampling)"
    assert step_title(session) == "Step time, ms (after 5 warm-up steps and 5 more)"
