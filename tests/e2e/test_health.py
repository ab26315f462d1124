"""Training health: a loss that becomes NaN at a known step is reported at that step,
with what preceded it; a clean run gets no finding; on an accelerator the loss is read
on the op sampler's steps only (no sync elsewhere)."""

from __future__ import annotations

import functools
import math
from operator import getitem
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from helpers import child_env, compare, read_summary, run_mpsprof
from mpsprofiler.diagnosis.facts import collect_facts
from mpsprofiler.probe.health import LossWatch, sampling_step
from mpsprofiler.session.recording import load_run

HERE = Path(__file__).parent.parent
SCRIPT = HERE / "scripts_health" / "nan_loss.py"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The NaN script and its clean twin, profiled (and compared byte for byte with plain
    python: the probe's reads change nothing)."""
    base = tmp_path_factory.mktemp("health")
    compare([str(SCRIPT)], base / "nan", env=child_env(STEPS="24", NAN_AT="12"))
    proc = run_mpsprof([str(SCRIPT)], base / "clean", env=child_env(STEPS="24", CLEAN="1"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {name: (read_summary(base / name), collect_facts(load_run(base / name).session)) for name in ("nan", "clean")}


@pytest.mark.slow
def test_nan_reported_at_its_step(runs):
    summary, facts = runs["nan"]
    finding = next(f for f in summary["findings"] if f["rule"] == "nonfinite-loss")
    assert finding["severity"] == "critical"
    assert "step 12" in finding["title"] and "nan" in finding["title"]
    assert facts["nonfinite_loss_step"] == 12
    assert facts["last_finite_loss_step"] == 11 and facts["last_finite_loss"] > 0
    assert facts["nonfinite_lr"] == 0.01  # the SGD lr, from param_groups
    assert facts["grad_norm_before_nan"] is not None  # the script clips: its norms were read
    assert facts["fp16_without_scaler"] is False
    assert "the learning rate was 0.01" in finding["evidence"]


@pytest.mark.slow
def test_clean_run_checked_and_silent(runs):
    summary, facts = runs["clean"]
    assert "nonfinite-loss" not in {f["rule"] for f in summary["findings"]}
    assert facts["loss_checks"] == 24 and facts["loss_checked"] == "every step"


class _Loss:
    """A stand-in for a one-element loss tensor on some device."""

    def __init__(self, value: float, device: str) -> None:
        self.value, self.device = value, SimpleNamespace(type=device)
        self.reads = 0

    def numel(self) -> int:
        return 1

    def is_floating_point(self) -> bool:
        return True

    def detach(self) -> _Loss:
        return self

    def item(self) -> float:
        self.reads += 1
        return self.value


def test_accelerator_losses_are_read_on_sampled_steps_only():
    sent: list[dict] = []
    step = [0]
    sampled = {5}
    watch = LossWatch(lambda kind, **f: sent.append(f), lambda: step[0], lambda: step[0] in sampled)
    losses = []
    for i in range(12):
        step[0] = i
        loss = _Loss(math.nan if i >= 8 else 1.0 / (i + 1), "cuda")
        losses.append(loss)
        watch.on_backward((loss,))
    assert [i for i, loss in enumerate(losses) if loss.reads] == [5]  # no read (no sync) elsewhere
    assert not sent  # the NaN from step 8 is not seen before a sampled step
    sampled.add(10)
    step[0] = 10
    watch.on_backward((_Loss(math.nan, "cuda"),))
    assert sent[0]["step"] == 10 and sent[0]["checked"] == "sampled steps" and sent[0]["last_finite_step"] == 5


def test_cpu_losses_read_every_step_and_fp16_without_scaler():
    sent: list[dict] = []
    step = [0]
    watch = LossWatch(lambda kind, **f: sent.append(f), lambda: step[0], lambda: False)
    model = torch.nn.Linear(2, 1).half()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    watch.on_optimizer(opt)
    for i, value in enumerate([0.5, 0.4, math.inf]):
        step[0] = i
        watch.on_backward(torch.tensor(value))
    assert sent[0]["step"] == 2 and sent[0]["value"] == "inf" and sent[0]["param_dtypes"] == ["float16"]
    assert sent[0]["grad_scaler"] is False and sent[0]["lr"] == 1e-3


def test_not_a_loss_is_not_read():
    watch = LossWatch(lambda kind, **f: None, lambda: 0, lambda: True)
    watch.on_backward((torch.ones(3),))  # a non-scalar backward (autograd.backward with grad_tensors)
    watch.on_backward((torch.ones(1, dtype=torch.int64),))
    assert watch.checks == 0


def test_sampling_step_is_the_accountants_answer():
    assert sampling_step(None) is None
    assert sampling_step(SimpleNamespace(sampling_step=7)) == 7
    assert sampling_step(SimpleNamespace(sampling_step=None)) is None
    assert sampling_step(SimpleNamespace(sampling_step=None), 8) is None  # the accountant decides


def test_without_op_accounting_a_sparse_schedule_of_its_own():
    """--no-ops: the loss check still gets sampled steps (2, 4, 8, ..., 256, then every
    256th), so an accelerator's NaN is seen, and device timing still measures busy time."""
    from tests.unit.test_device_time import Loop

    picked = [i for i in range(1100) if sampling_step(None, i) == i]
    assert picked == [2, 4, 8, 16, 32, 64, 128, 256, 512, 768, 1024]
    sent: list[dict] = []
    step = [0]
    watch = LossWatch(lambda kind, **f: sent.append(f), lambda: step[0],
                      lambda: sampling_step(None, step[0]) == step[0])
    losses = []
    for i in range(40):
        step[0] = i
        losses.append(_Loss(math.nan if i >= 20 else 1.0, "cuda"))
        watch.on_backward((losses[-1],))
    assert [i for i, loss in enumerate(losses) if loss.reads] == [2, 4, 8, 16, 32]
    assert sent[0]["step"] == 32 and sent[0]["last_finite_step"] == 16
    loop = Loop(ops=200, host_op=20e-6, kernel=2e-6, sampled=lambda i: sampling_step(None, i) == i)
    readings = [r for r in loop.run(2000) if r["valid"]]
    # device timing keeps its own budgeted schedule, never on a step the fallback samples
    assert len(readings) >= 2 and not {r["step"] for r in readings} & set(picked)


@pytest.mark.slow
def test_a_failing_loss_check_harms_nothing_and_finds_nothing(tmp_path):
    """The health instrument raising inside its backward hook: switched off once, the
    training's output unchanged, and no finding from a failed instrument."""
    import json
    import subprocess
    import sys

    from helpers import SCRIPTS, Result, assert_same, read_events, run_python

    env = child_env(STEPS="16", NAN_AT="8")
    plain = run_python([str(SCRIPT)], env=env)
    cmd = [sys.executable, str(SCRIPTS / "drive.py"), str(tmp_path / "run"), json.dumps({"fault": ["health"]}),
           str(SCRIPT)]
    proc = subprocess.run(cmd, capture_output=True, stdin=subprocess.DEVNULL, env=env, timeout=180)
    profiled = Result(proc.returncode, proc.stdout, proc.stderr, 0.0)
    assert_same(plain, profiled)
    errors = [e for e in read_events(tmp_path / "run") if e["k"] == "probe_error"]
    assert [e["instrument"] for e in errors] == ["health"]
    assert "nonfinite-loss" not in {f["rule"] for f in read_summary(tmp_path / "run")["findings"]}


@pytest.fixture(scope="module")
def steady_runs(tmp_path_factory):
    """The NaN script run past the warm-up (probe/backward_sampling.py): NaN from step 200 of
    300, and its clean twin; the profiled output is the plain run's, byte for byte."""
    base = tmp_path_factory.mktemp("steady")
    compare([str(SCRIPT)], base / "nan", env=child_env(STEPS="300", NAN_AT="200"))
    compare([str(SCRIPT)], base / "clean", env=child_env(STEPS="300", CLEAN="1"))
    out = {}
    for name in ("nan", "clean"):
        run = load_run(base / name)
        out[name] = (read_summary(base / name), collect_facts(run.session), run.session)
    return out


@pytest.mark.slow
def test_steady_loop_checks_sampled_steps_and_says_so(steady_runs):
    """Once steady, one step in EVERY (and the op sampler's) has its loss checked and its
    backward pass timed, the same steps: the others' backward time is unmeasured (None),
    never 0; the summary says how many of how many steps, and from which step."""
    from mpsprofiler.probe.backward_sampling import EVERY, WARM_STEPS

    summary, facts, session = steady_runs["clean"]
    assert "nonfinite-loss" not in {f["rule"] for f in summary["findings"]}
    assert session.steps.count == 300  # steps counted exactly: the optimizer hook runs at every one
    assert facts["loss_checked"] == "sampled steps" and facts["loss_check_steps"] == 300
    assert facts["loss_check_every"] == EVERY and facts["loss_check_sampled_from"] == WARM_STEPS + 1
    timed = [p.i for p in session.steps.series if p.bwd is not None]
    assert all(p.bwd is None or p.bwd > 0 for p in session.steps.series)
    # every step of the warm-up (the first iteration's pass is step 0's: the tracker learns
    # the optimizer cycle at the second optimizer step, which closes steps 0 and 1 at once)
    assert timed[:WARM_STEPS] == [0, *range(2, WARM_STEPS + 1)]
    later = [i for i in timed if i > WARM_STEPS]
    assert len(later) >= (300 - WARM_STEPS) // EVERY - 1 and len(later) < (300 - WARM_STEPS) // 2
    assert facts["loss_checks"] == len(timed) + 1  # one loss a step: checked where timed (step 1's in step 0)
    phases = session.steps.phase_means()
    assert phases is not None and phases["backward"] > 0 and phases["steps"] >= len(later) // 2


@pytest.mark.slow
def test_steady_nan_is_named_by_its_window(steady_runs):
    """A NaN first read on a sampled step: reported with the last finite step read, as the
    window it went non-finite in, not as a first non-finite step it may not be."""
    summary, facts, _ = steady_runs["nan"]
    finding = next(f for f in summary["findings"] if f["rule"] == "nonfinite-loss")
    step, last = facts["nonfinite_loss_step"], facts["last_finite_loss_step"]
    assert last < 200 <= step < 200 + 8, (last, step)
    assert facts["nonfinite_loss_checked"] == "sampled steps"
    if last + 1 < step:
        assert f"between step {last + 1} and step {step}" in finding["title"], finding["title"]
    else:
        assert f"at step {step}" in finding["title"], finding["title"]
    # clip_grad_norm_ runs at every step: its first NaN norm (step 200, the NaN step's
    # backward) is named, sent as the word "nan" (JSON has no NaN: it read as unknown before)
    assert facts["grad_norm_before_nan"] != facts["grad_norm_before_nan"]  # a float NaN
    assert facts["nonfinite_preceded_grad"] in ("not_finite_nan", "no_jump_nan")
    assert facts["grad_norm_first_bad_step"] == 200
    # a NaN norm is the NaN itself, no explosion: the fix is the loss's log, not clipping
    # (the script clips already); as in the every-step run, which reads the NaN before its norm
    assert facts["nonfinite_fix_first"] == "lower_lr"
    if last + 1 < step:
        assert "first returned a non-finite gradient norm at step 200" in finding["evidence"]


def _keep(sent: list[dict], kind: str, **fields: object) -> None:
    sent.append(fields)


def test_once_sampled_a_nan_is_exact_only_after_a_finite_step_before_it():
    """After ``sampled_from`` (set by probe/backward_sampling.py) a CPU loss is read on the
    wrapper's steps only: a NaN whose previous step was not read is "sampled steps" (its
    window), one right after a finite reading stays "every step"; the summary says how many
    losses over how many steps, from which step one in EVERY."""
    from mpsprofiler.probe.backward_sampling import EVERY

    for read, exact in (([0, 1, 2, 3, 10, 17], False), ([0, 1, 2, 3, 10, 11], True)):
        sent: list[dict] = []
        step = [0]
        watch = LossWatch(functools.partial(_keep, sent), functools.partial(getitem, step, 0), lambda: False)
        watch.sampled_from = 4
        for i in read:
            step[0] = i
            watch.on_backward(torch.tensor(math.nan if i == read[-1] else 0.5))
        assert sent[0]["step"] == read[-1] and sent[0]["last_finite_step"] == read[-2]
        assert sent[0]["checked"] == ("every step" if exact else "sampled steps")
        step[0] = 20
        summary = watch.summary()
        assert summary == {"what": "loss_checks", "n": len(read), "checked": "sampled steps", "steps": 20,
                           "sampled_from": 4, "every": EVERY}
