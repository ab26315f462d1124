"""Backward passes the step counter once lost (issues 27 and 33): a parameter far from the
loss (the graph search gave up and stored None, and the next pass called it: the whole
step counter switched off), a reentrant checkpoint (its backward inside the backward was
taken for a step) and torch.compile's own passes while it traces."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from helpers import FakeClock, child_env, mpsprof_cli, read_events, read_summary
from mpsprofiler.devices.cpu import CpuBackend
from mpsprofiler.probe import backward
from mpsprofiler.probe.steps import StepTracker

SCRIPT = Path(__file__).parent.parent / "scripts_loops" / "deep_backward.py"
CASES = {"deep": 20, "tail": 30, "checkpoint": 200, "compiled": 30}


@pytest.fixture(scope="module")
def deep_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[object, Path]]:
    base = tmp_path_factory.mktemp("deep")

    def one(mode: str) -> tuple[object, Path]:
        run_dir = base / mode
        proc = mpsprof_cli("run", "--headless", "-o", str(run_dir), str(SCRIPT), mode, str(CASES[mode]),
                           env=child_env(), timeout=240)
        return proc, run_dir

    with ThreadPoolExecutor(2) as pool:
        return dict(zip(CASES, pool.map(one, CASES), strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("mode", list(CASES))
def test_every_optimizer_step_is_counted(deep_runs, mode: str) -> None:
    proc, run_dir = deep_runs[mode]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"{mode}: {CASES[mode]} optimizer steps" in proc.stdout
    summary = read_summary(run_dir)
    assert summary["steps"]["count"] == CASES[mode], proc.stderr[-2000:]
    assert summary["steps"]["mode"] == "optimizer"
    errors = [e for e in read_events(run_dir) if e["k"] == "probe_error" and e["instrument"] != "ops modules"]
    assert errors == []
    assert "no-step-signal" not in proc.stderr and not re.search(r"switched off: \w*Error", proc.stderr)


def _tracked(fn) -> tuple[StepTracker, list[BaseException]]:
    """Run ``fn`` with the backward hook feeding a step tracker (no optimizer hook)."""
    clock = FakeClock(tick=1e-4)

    tracker = StepTracker(lambda *a, **k: None, CpuBackend(), clock)
    errors: list[BaseException] = []
    uninstall = backward.install(lambda site, start, end, reset: tracker.on_backward(site, end, reset, start),
                                 clock, errors.append)
    try:
        fn()
    finally:
        uninstall()
    tracker.finish()
    return tracker, errors


def test_parameter_beyond_the_search_budget_still_counts_every_pass() -> None:
    """Manual updates (no optimizer), the parameter further than MAX_NODES nodes from the
    loss: the failed search is remembered (no None called), every pass is a step."""
    import torch

    w = torch.nn.Parameter(torch.ones(4))

    def loop() -> None:
        for _ in range(6):
            h = w * 1.0
            for _ in range(backward.MAX_NODES + 10):
                h = h * 1.0
            h.sum().backward()
            with torch.no_grad():
                w.sub_(0.01 * w.grad)
            w.grad = None

    tracker, errors = _tracked(loop)
    assert errors == []
    assert tracker.index == 6 and tracker.mode == "backward"
    assert backward._leaf_of(torch.ones(2, requires_grad=True) * 2) is not None


def test_reentrant_checkpoint_backward_is_not_a_step() -> None:
    import torch
    import torch.utils.checkpoint as cp

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))

    def loop() -> None:
        for _ in range(7):
            x = torch.randn(3, 4, requires_grad=True)  # a new batch each iteration
            cp.checkpoint(model, x, use_reentrant=True).sum().backward()
            with torch.no_grad():
                for p in model.parameters():
                    p.sub_(0.01 * p.grad)
            model.zero_grad(set_to_none=True)

    tracker, errors = _tracked(loop)
    assert errors == []
    assert tracker.index == 7 and tracker.backwards == 7
