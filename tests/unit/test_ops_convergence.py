"""Op accounting that converges: once the census of ops per step stops changing, sampling
nearly stops; something new (a module, a step-time shift, an outlier step) wakes it.

Step durations are fed by hand (a fake clock): no timed assertion depends on this machine.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

from mpsprofiler.probe import ops as ops_module
from mpsprofiler.probe.ops import OpAccountant
from mpsprofiler.probe.ops_schedule import (
    CONVERGED_SHARE,
    EARLY_FREE_OPS,
    FOLLOW_PERIOD,
    STABLE_SAMPLES,
    SampleSchedule,
)


def _drive(sched: SampleSchedule, steps: range, base: float, extra: float,
           census: Any = "same") -> list[int]:  # fmt: skip
    """Run ``steps`` through the schedule as the accountant does; a sampled step lasts
    ``base + extra`` and reports ``census`` (a callable of the step, or a constant)."""
    sampled: list[int] = []
    active: int | None = None
    for step in steps:
        if active is not None:  # the sampled step ends at this boundary
            sched.total += base + extra
            sched.sampled(active, base + extra, 0.0, census(active) if callable(census) else census)
            active = None
        elif step:
            sched.total += base
            if base > sched.wake_above:
                sched.outlier(step, base)
            sched.plain_step(step, base)
        if sched.due(step):
            active = step
            sampled.append(step)
    return sampled


def test_a_stable_census_makes_sampling_nearly_stop_and_stays_in_budget() -> None:
    converging = SampleSchedule(0.005, (3, 5))
    sampled = _drive(converging, range(60_000), 0.005, 0.010)
    changing = SampleSchedule(0.005, (3, 5))
    every_census_new = _drive(changing, range(60_000), 0.005, 0.010, census=lambda s: s)
    assert sampled[:2] == [3, 5]
    assert converging.converged and converging.stable >= STABLE_SAMPLES - 1
    assert not changing.converged
    # a census that never repeats keeps the full budget; a stable one backs off
    assert len(sampled) * 4 < len(every_census_new), (len(sampled), len(every_census_new))
    late = [s for s in sampled if s >= 30_000]
    assert len(late) <= 2, late  # the interval at least doubles per sample once converged
    # the budget holds over all steps (the forced early samples paid back by step ~600)
    assert changing.added / changing.total <= 0.005 + 1e-9
    assert converging.added / converging.total <= 0.005 * CONVERGED_SHARE * 2


def test_a_new_census_resumes_sampling_at_the_full_budget() -> None:
    sched = SampleSchedule(0.005, (3, 5))
    _drive(sched, range(50_000), 0.005, 0.010)
    assert sched.converged
    slow_interval = sched.interval
    sched.sampled(50_000, 0.015, 0.0, "a new module appeared")
    assert not sched.converged and sched.stable == 0
    assert sched.interval < slow_interval
    # the interval, lengthened by at most 9 steps to spread the phases (probe/sample_phase.py)
    assert 50_000 + sched.interval <= sched.next_sample <= 50_000 + sched.interval + 9


def test_an_outlier_step_wakes_sampling_and_a_known_census_keeps_convergence() -> None:
    sched = SampleSchedule(0.005, (3, 5))
    _drive(sched, range(20_000), 0.005, 0.010)
    assert sched.converged and sched.next_sample > 20_010
    sched.total += 0.5
    assert 0.5 > sched.wake_above  # an evaluation pass or a recompile inside one step
    sched.outlier(20_001, 0.5)
    assert sched.due(20_001) and sched.wakes == 1
    sched.sampled(20_001, 0.015, 0.0, "same")
    assert sched.converged  # nothing new: convergence stands


def test_a_shift_in_step_time_wakes_sampling() -> None:
    sched = SampleSchedule(0.005, (3, 5))
    _drive(sched, range(20_000), 0.005, 0.010)
    assert sched.converged
    before = sched.next_sample
    for step in range(20_000, 20_200):  # the model grew a module: steps 40% longer
        sched.total += 0.007
        sched.plain_step(step, 0.007)
        if sched.due(step):
            break
    assert sched.wakes == 1 and sched.next_sample < before


def test_accountant_converges_on_a_real_model_and_resumes_on_a_new_module() -> None:
    """The real OpAccountant and dispatch mode on a tiny model; durations fed by hand
    (5 ms steps, 10 ms more when sampled; a 10% budget keeps the run short). After the census is stable the model gains a
    module; the step-time shift wakes sampling and the new census ends convergence."""
    events: list[dict[str, Any]] = []
    acct = OpAccountant(lambda kind, **f: events.append(f) if kind == "ops" else None, budget=0.1, device_kind="cpu")
    torch.manual_seed(0)
    body, extra = nn.Linear(8, 8), nn.Linear(8, 8)
    opt = torch.optim.SGD([*body.parameters(), *extra.parameters()], lr=0.01)
    x = torch.randn(4, 8)

    def run(steps: range, grown: bool, base: float) -> list[int]:
        sampled = []
        for step in steps:
            last = None if step == 0 else base + (0.010 if acct.sampling_step == step - 1 else 0.0)
            acct.on_step_boundary(step, last)
            if acct.sampling_step == step:
                sampled.append(step)
            y = body(x)
            if grown:
                y = extra(y)
            opt.zero_grad()
            y.sum().backward()
            opt.step()
        return sampled

    first = run(range(800), grown=False, base=0.005)
    assert first[:2] == [3, 5] and acct.schedule.converged
    assert len([s for s in first if s >= 300]) <= 1, first
    later = run(range(800, 1000), grown=True, base=0.007)
    acct.close()
    assert later, "the step-time shift woke sampling"
    assert not acct.schedule.converged or acct.schedule.stable >= STABLE_SAMPLES - 1
    assert any(e["converged"] is False and e["step"] >= 800 for e in events), "the new module ended convergence"
    assert all("cost_s" in e and e["cost_s"] <= e["steps_s"] for e in events)
    def addmm(e: dict[str, Any]) -> int:
        return sum(op["calls"] for op in e["ops"] if op["op"] == "aten::addmm.default")

    assert addmm(events[-1]) == 2 * addmm(events[0])  # the new module's ops were counted


def test_the_cost_of_op_accounting_is_a_fact_and_a_report_line() -> None:
    """The events' running cost reaches the session, the ``ops_cost_share`` fact (against
    the training time of all steps) and the report's op-accounting sentence."""
    from types import SimpleNamespace

    from mpsprofiler.diagnosis.analyzers.ops import ops_facts
    from mpsprofiler.report.ops_tables import ops_headline
    from mpsprofiler.session.ops import OpStats

    stats = OpStats()
    for step, cost, converged in ((3, 0.010, False), (5, 0.018, False), (900, 0.025, True)):
        stats.feed({"step": step, "host_s": 0.02, "overhead_s": 0.01, "interval": 100, "ops": [],
                    "cost_s": cost, "steps_s": step * 0.005, "converged": converged})  # fmt: skip
    facts = ops_facts(stats, "cpu", training_s=10.0)
    assert facts["ops_cost_s"] == 0.025 and facts["ops_converged"] is True
    assert abs(facts["ops_cost_share"] - 0.0025) < 1e-12
    session = SimpleNamespace(steps=SimpleNamespace(total_dur=10.0))
    line = ops_headline(session, stats.to_dict(predict=False))  # type: ignore[arg-type]
    assert "op accounting cost 25 ms in all, 0.25% of the training time" in line, line
    assert "sampling backed off" in line


def _keeping(acct: OpAccountant, steps: int, keeps: Callable[[int], bool]) -> list[int]:
    """Steps of 5 ms (15 ms sampled) that make ``feats = x * 2.0`` and keep it in a list
    where ``keeps(step)``; the steps ``acct`` sampled."""
    kept: list[torch.Tensor] = []
    x = torch.ones(64, 64)
    last: float | None = None
    sampled: list[int] = []
    for step in range(steps):
        acct.on_step_boundary(step, last)
        is_sampled = acct.sampling_step == step
        if is_sampled:
            sampled.append(step)
        feats = x * 2.0
        if keeps(step):
            kept.append(feats)
        last = 0.005 + (0.010 if is_sampled else 0.0)
    acct.close()
    return sampled


def test_a_tensor_kept_on_one_sampled_step_holds_convergence_off_until_a_second_says() -> None:
    """Convergence must not starve the leak tracker: a tensor of a sampled step that survives
    a check but was seen on one sampled step only (``LeakTracker.unsettled``) leaves the
    sample's census out, so sampling goes on at the full budget until a second sampled step
    that keeps one shows the pile (a script keeping a tensor every 5th step)."""

    leaks: list[dict[str, Any]] = []

    def run(keep: bool) -> list[int]:
        acct = OpAccountant(lambda kind, **fields: leaks.append(fields) if kind == "leaks" else None, budget=0.02)
        return _keeping(acct, 6000, lambda step: keep and step % 5 == 0)

    clean = run(False)
    leaks.clear()
    leaking = run(True)
    assert len(leaking) > len(clean), (clean, leaking)
    # two sampled steps kept a tensor, so the tracker saw the pile on two steps
    assert len([s for s in leaking if s % 5 == 0]) >= 2, leaking
    assert any(len(site["steps"]) >= 2 for event in leaks for site in event.get("sites", [])), leaks


def _drive_early(ops: int, excess: float, cpu: float | None, steps: int = 20_000,
                 planned: int | None = None, finish: float = 0.0) -> list[int]:  # fmt: skip
    """Steps of 10 ms; a sampled step lasts ``excess`` longer (wall time) and its process
    spent ``cpu`` CPU seconds (None: not known) in it and its finish, whose wall time is
    ``finish``; ``planned``: the run's length as a framework announced it."""
    sched = SampleSchedule(0.005, (3, 5))
    sched.plan(planned)
    sampled, active = [], None
    for step in range(steps):
        if active is not None:
            sched.total += 0.010 + excess
            sched.sampled(active, 0.010 + excess, finish, "same", ops=ops, cpu_s=cpu)
            active = None
        elif step:
            sched.total += 0.010
            sched.plain_step(step, 0.010)
        if sched.due(step):
            active = step
            sampled.append(step)
    return sampled


def test_the_second_early_sample_waits_for_the_budget_when_the_first_was_expensive() -> None:
    """The first early sample is forced on every run; the second only where the first was
    cheap (``EARLY_FREE_OPS``, ``EARLY_FREE_S``): a nanoGPT-sized step (its sample 40 ms
    over a 10 ms step) would pay it twice within its first seconds, over a budget of 0.5%
    of a run of thousands of steps. Then the second comes once the budget holds it."""
    assert _drive_early(EARLY_FREE_OPS, 0.005, None)[:2] == [3, 5]
    for many_ops, costly in ((_drive_early(EARLY_FREE_OPS + 1, 0.005, None), False),
                             (_drive_early(100, 0.040, 0.050), True)):  # fmt: skip
        assert many_ops[0] == 3 and many_ops[1] > 200, many_ops
        if costly:  # the budget held right after the second sample: 2 x 40 ms within 0.5%
            assert 2 * 0.040 <= 0.005 * (many_ops[1] * 0.010) * 1.05, many_ops


def test_a_sample_slow_only_for_want_of_a_cpu_keeps_the_second_early_sample() -> None:
    """On a busy machine the first sample's wall time grows (40 ms over the step), its CPU
    time does not (12 ms in a 10 ms step): the decision follows the CPU, so a short test
    script keeps both early samples however loaded the machine running it is."""
    assert _drive_early(100, 0.040, 0.012)[:2] == [3, 5]
    assert _drive_early(100, 0.040, 0.040)[1] > 5
    # a CPU time over the wall time cannot raise the estimate: the wall time decides
    assert _drive_early(100, 0.005, 0.200)[:2] == [3, 5]
    # the event built after the step waited for a CPU too (30 ms of wall time, a CI run's
    # test_ops_facts lost its second sample so): its CPU time is what counts
    assert _drive_early(100, 0.005, 0.012, finish=0.030)[:2] == [3, 5]
    assert _drive_early(100, 0.005, None, finish=0.030)[1] > 5


def test_the_accountant_passes_the_sample_s_op_count_to_the_schedule(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real accountant on a step of ~1,200 ops (a deep stack of tiny layers) and on a
    step of ~40: the deep one's second sample is not at step 5, unless the loop keeps a
    tensor of each step (``history.append(loss)``): the leak check at step 5 finds step 3's
    still alive, and the second sampled step, which names the line, comes as planned.

    The steps' durations given to the accountant are made up (5 ms), so the sample's time
    cap (``SAMPLE_CAP_STEPS`` plain steps, at least ``MIN_SAMPLE_CAP_S``) is not measured
    by them: on a loaded machine (CI runs the type checker and a pip install beside these
    tests) the real deep sample took over 0.5 s, was cut in its forward pass before the
    loss was made, and no tensor of step 3 was followed. The cap has its own tests."""
    monkeypatch.setattr(ops_module, "MIN_SAMPLE_CAP_S", math.inf)

    def sampled_steps(layers: int, keep: bool = False) -> tuple[list[int], int, list[dict[str, Any]]]:
        events: list[dict[str, Any]] = []
        leaks: list[dict[str, Any]] = []

        def emit(kind: str, **fields: Any) -> None:
            (events if kind == "ops" else leaks if kind == "leaks" else []).append(fields)

        acct = OpAccountant(emit, budget=0.005, device_kind="cpu")
        torch.manual_seed(0)
        model = nn.Sequential(*[nn.Linear(4, 4) for _ in range(layers)])
        opt = torch.optim.SGD(model.parameters(), lr=0.001)
        x = torch.randn(2, 4)
        history = []
        for step in range(12):
            acct.on_step_boundary(step, None if step == 0 else 0.005)
            opt.zero_grad()
            loss = model(x).sum()
            loss.backward()
            opt.step()
            if keep:
                history.append(loss)
        acct.close()
        ops = sum(op["calls"] for op in events[0]["ops"]) if events else 0
        return [e["step"] for e in events], ops, leaks

    small, small_ops, _ = sampled_steps(2)
    deep, deep_ops, _ = sampled_steps(200)
    assert small_ops <= EARLY_FREE_OPS < deep_ops, (small_ops, deep_ops)
    assert small[:2] == [3, 5], small
    assert deep[:1] == [3] and 5 not in deep, deep
    kept, _, leaks = sampled_steps(200, keep=True)
    assert kept[:2] == [3, 5], kept
    sites = [site for event in leaks for site in event.get("sites", [])]
    assert any(len(site["steps"]) >= 2 and site.get("holder", {}).get("name") == "history" for site in sites), sites


def test_a_run_of_announced_length_takes_the_second_early_sample_only_within_its_budget() -> None:
    """A Trainer says how many steps it will make (``max_steps``). A 10 ms step whose sample
    costs 8 ms: a 200-step run (2 s, 10 ms of budget) has room for one such sample, not two,
    so the second waits for the budget like any later one and the run pays one; a 1,000-step
    run (50 ms of budget) keeps both. Without an announced length the cheap first sample
    keeps the second, as before."""
    short = _drive_early(100, 0.008, None, steps=200, planned=200)
    assert short == [3], short
    assert 0.008 * len(short) <= 0.005 * 200 * 0.010
    assert _drive_early(100, 0.008, None, steps=1_000, planned=1_000)[:2] == [3, 5]
    assert _drive_early(100, 0.008, None, steps=200)[:2] == [3, 5]
    for nothing_said in (None, 0, -1):
        sched = SampleSchedule(0.005, (3, 5))
        sched.plan(nothing_said)
        assert sched.planned is None and "planned" not in sched.cost()
    sched.plan(200)
    assert sched.cost()["planned"] == 200


def test_an_early_step_left_out_is_sampled_only_when_a_tensor_was_kept() -> None:
    """The schedule's side: an expensive first sample leaves step 5 to the leak check."""
    for kept in (False, True):
        sched = SampleSchedule(0.005, (3, 5))
        for step in range(1, 4):
            sched.total += 0.010
            sched.plain_step(step, 0.010)
        assert sched.due(3)
        sched.sampled(3, 0.060, 0.0, "same", ops=5_000)
        assert sched.early_if_kept == [5] and not sched.due(5)
        sched.early_step_due(5, kept)
        assert sched.due(5) is kept and sched.early_if_kept == []


@pytest.mark.parametrize("period", [4, 5, 10, 20])
def test_the_sample_after_a_leak_candidate_comes_in_its_phase(period: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tensor kept every Nth step (``if step % N == 0``) names its line only once two
    sampled steps kept one. Step 5 keeps one here, step 3 does not; the phase walk
    (sample_phase.py) reached step 5's phase again only some samples later, which a short
    run's budget did not buy (a 600-step script keeping every 5th step had its line found in
    2 runs of 5). The sample after a candidate now comes in its phase (``FOLLOW_PERIOD``),
    never earlier than planned and at most 19 steps later: the third sample keeps one, and
    the line is found on steps 5 and that one."""
    moved: list[tuple[float, float]] = []
    follow = SampleSchedule.follow_phase

    def spy(self: SampleSchedule, next_step: int, step: int) -> None:
        before = self.next_sample
        follow(self, next_step, step)
        moved.append((before, self.next_sample))

    monkeypatch.setattr(SampleSchedule, "follow_phase", spy)
    leaks: list[dict[str, Any]] = []
    acct = OpAccountant(lambda kind, **fields: leaks.append(fields) if kind == "leaks" else None,
                        budget=0.005, device_kind="cpu")
    sampled = _keeping(acct, 2000, lambda step: step % period == 5 % period)
    assert sampled[:2] == [3, 5] and len(sampled) >= 3, sampled
    assert len(moved) == 1, moved  # one candidate (step 5's tensor), one move
    (before, after), = moved
    assert after == sampled[2] and before <= after <= before + FOLLOW_PERIOD - 1, (moved, sampled)
    assert sampled[2] % period == 5 % period, sampled
    sites = [site for event in leaks for site in event.get("sites", []) if site["steps"] == [5, sampled[2]]]
    assert sites and "kept.append" not in sites[0]["code"] and sites[0]["code"] == "feats = x * 2.0", leaks
