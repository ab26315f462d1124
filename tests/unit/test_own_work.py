"""Warm-up is the framework's, not the script's (issue 27, item 3): a step slow because the
script evaluated its model over a DataLoader (minGPT's adder at iteration 0) is not warm-up.

The real case runs in tests/e2e/test_corpus.py (minGPT's adder, its own evaluation at iteration
0); these are the analyzer's arithmetic on the step figures such a run records.
"""

from __future__ import annotations

from mpsprofiler.diagnosis import diagnose
from tests.unit.test_analyzers import build_session, facts_of, step_rows

# the adder's first steps under load: step 1 also ran the evaluation callback (100 test
# batches of 100), step 2 was slowed by the machine; then steady ~60 ms steps
DURS = [0.17, 6.45, 0.2] + [0.06] * 30
EVAL_BATCHES = [1, 101] + [1] * 31


def _rules(session) -> set[str]:
    return {f.rule for f in diagnose(session).findings}


def test_an_evaluation_step_is_set_aside_and_no_warm_up_is_reported() -> None:
    session = build_session(rows=step_rows(DURS, batches=EVAL_BATCHES))
    facts = facts_of(session)
    assert facts["warmup_own_work_steps"] == 1 and facts["warmup_own_work_s"] == 6.45
    assert facts["warmup_cost_s"] < 0.5 and facts["warmup_slowest_step_ms"] < 1000
    assert "long-warmup" not in _rules(build_session(rows=step_rows(DURS, batches=EVAL_BATCHES)))


def test_the_same_slow_step_without_a_loop_of_its_own_is_warm_up() -> None:
    """Control: a step as slow that fetched its one batch (a kernel compile, a cache fill
    inside the framework) is warm-up as before."""
    facts = facts_of(build_session(rows=step_rows(DURS)))
    assert "warmup_own_work_steps" not in facts
    assert facts["warmup_steps"] == 3 and facts["warmup_cost_s"] > 6
    assert "long-warmup" in _rules(build_session(rows=step_rows(DURS)))


def test_gradient_accumulation_steps_are_not_own_work() -> None:
    """Every step fetching 4 micro-batches is the usual step, not a loop of the script's."""
    facts = facts_of(build_session(rows=step_rows(DURS, batches=[4] * len(DURS))))
    assert "warmup_own_work_steps" not in facts and facts["warmup_steps"] == 3


# --------------------------------------------------------------------------- a loaded machine

SLOW_THEN_FAST = [0.2] + [0.3] * 30 + [0.06] * 70
"""A minGPT run on a shared 2-core machine: 0.3 s steps until the other programs finished."""


def _loaded(core_wait_per_s_while_slow: float) -> object:
    from mpsprofiler import events

    rows = step_rows(SLOW_THEN_FAST)
    slow_until = rows[30][1]
    mem, t, waited = [], 1.0, 0.0
    while t <= rows[-1][1] + 0.5:
        mem.append(events.encode(events.KIND_MEM, t, rss=100 << 20, rss_children=0, workers=0,
                                 sys_available=8 << 30, sys_total=16 << 30, swap_used=0, cpu_pct=50.0,
                                 cpu_main_s=t / 2, runq_main_s=round(waited, 4)))
        t += 0.5
        waited += 0.5 * (core_wait_per_s_while_slow if t <= slow_until else 0.02)
    return build_session(rows=rows, mem=mem)


def test_slow_steps_of_a_thread_waiting_for_a_core_are_not_warm_up() -> None:
    """The training thread waited for a core 80% of the slow stretch (Linux schedstat): the
    machine was busy, the run had no warm-up (issue 27: long-warmup in 1 of 5 adder runs)."""
    session = _loaded(0.8)
    facts = facts_of(session)
    assert facts["warmup_steps"] >= 3 and facts["warmup_above_steady_share"] == 1.0
    assert facts["warmup_core_wait_share"] >= 0.9
    assert "long-warmup" not in _rules(session)


def test_the_same_slow_steps_with_the_thread_on_a_core_are_warm_up() -> None:
    session = _loaded(0.02)
    facts = facts_of(session)
    assert facts["warmup_core_wait_share"] < 0.1
    assert "long-warmup" in _rules(session)


WORD_LM_UNDER_LOAD = [0.877, 0.063, 0.198, 0.254, 0.151, 0.348, 0.047, 0.002, 0.214, 0.002, 0.159, 0.148, 0.002,
                      0.136, 0.119, 0.131, 0.08, 0.001, 0.209, 0.002, 0.509, 0.115, 0.203, 0.002, 0.001, 0.179,
                      0.046, 0.002, 0.001, 0.074, 0.001, 0.093, 0.002, 0.082, 0.002, 0.078, 0.037, 0.002, 0.121,
                      0.002] * 2
"""The first 40 steps of word_language_model run 2 of 5 on the loaded machine (recorded),
twice: 2 ms when the scheduler gave the thread a core, up to 0.5 s when it did not."""


def test_a_loaded_machines_noise_after_step_0_is_not_warm_up() -> None:
    session = build_session(rows=step_rows(WORD_LM_UNDER_LOAD))
    facts = facts_of(session)
    assert facts["warmup_steps"] >= 3 and facts["warmup_cost_s"] >= 0.5  # what the old condition fired on
    assert facts["warmup_above_steady_share"] < 0.75
    assert "long-warmup" not in _rules(session)
