"""A probe hook that raises harms only its own instrument (issue 27), in the pattern of
test_faults.py (``drive.py`` passes ``{"fault": [...]}``, the probe's test-only option):
the backward hook failing leaves the optimizer's step counter on, and a dead instrument's
facts are removed before the rules run, so no "no steps" or "no problem" finding comes
from it."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from helpers import SCRIPTS, child_env, read_events, read_summary
from mpsprofiler.diagnosis import diagnose
from mpsprofiler.diagnosis.instruments import dead_analyzers
from mpsprofiler.session.recording import load_run

LOOPS = Path(__file__).parent.parent / "scripts_loops"
RUNS = {
    "plain": ([], str(SCRIPTS / "train_small.py")),
    "backward": (["backward"], str(SCRIPTS / "train_small.py")),
    "manual-backward": (["backward"], str(LOOPS / "regression.py")),
    "memory": (["memory"], str(SCRIPTS / "train_small.py")),
}


@pytest.fixture(scope="module")
def injected(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[subprocess.CompletedProcess[bytes], Path]]:
    base = tmp_path_factory.mktemp("inject")

    def one(name: str) -> tuple[subprocess.CompletedProcess[bytes], Path]:
        faults, script = RUNS[name]
        run_dir = base / name
        cmd = [sys.executable, str(SCRIPTS / "drive.py"), str(run_dir), json.dumps({"fault": faults}), script]
        proc = subprocess.run(cmd, capture_output=True, stdin=subprocess.DEVNULL, timeout=240,
                              env=child_env(MAX_BATCHES="25"))
        return proc, run_dir

    with ThreadPoolExecutor(2) as pool:
        return dict(zip(RUNS, pool.map(one, RUNS), strict=True))


def _errors(run_dir: Path) -> list[dict]:
    return [e for e in read_events(run_dir) if e["k"] == "probe_error"]


@pytest.mark.slow
def test_backward_fault_leaves_the_optimizer_counter_on(injected) -> None:
    plain, plain_dir = injected["plain"]
    proc, run_dir = injected["backward"]
    assert proc.returncode == plain.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == plain.stdout
    errors = _errors(run_dir)
    assert [e["instrument"] for e in errors] == ["backward"]  # once
    assert errors[0]["message"] == "RuntimeError: injected fault in backward (test option)"
    steps = load_run(run_dir).session.steps
    assert steps.count == 16 and steps.mode == "optimizer"
    # no finding the unfaulted run does not have
    found = {f["rule"] for f in read_summary(run_dir)["findings"]}
    assert found <= {f["rule"] for f in read_summary(plain_dir)["findings"]}
    assert b"instrument 'backward' was switched off" in proc.stderr


@pytest.mark.slow
def test_dead_step_counter_gives_no_step_finding(injected) -> None:
    """No optimizer: the backward passes count the steps. With that hook dead, no step fact
    reaches the rules: no 'no-step-signal', no step finding."""
    proc, run_dir = injected["manual-backward"]
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert b"after 25 batches" in proc.stdout
    assert len(_errors(run_dir)) == 1
    loaded = load_run(run_dir)
    diagnosis = diagnose(loaded.session)
    for fact in ("step_count", "steady_steps", "step_signal"):
        assert fact not in diagnosis.facts, fact
    assert "run_s" in diagnosis.facts  # the launcher's own facts stay
    assert [f.rule for f in diagnosis.findings if f.severity in ("warning", "critical")] == []
    assert "no-step-signal" not in {f["rule"] for f in read_summary(run_dir)["findings"]}


def test_which_instrument_takes_which_facts() -> None:
    assert "loops" in dead_analyzers([{"instrument": "backward"}], "backward")
    assert dead_analyzers([{"instrument": "backward"}], "optimizer") == set()
    assert dead_analyzers([{"instrument": "memory"}], "optimizer") == {"memory", "leaks", "capacity"}
    assert dead_analyzers([{"instrument": "ops modules"}], "optimizer") == set()  # names only
    # a loss watch that died after some reads (the non-finite finding's basis), a device
    # timer that died after some readings (the host-bound finding's)
    assert dead_analyzers([{"instrument": "health"}], "optimizer") == {"health"}
    assert dead_analyzers([{"instrument": "device_time"}], "optimizer") == {"host_bound"}
    assert dead_analyzers([{"instrument": "ops"}], "optimizer") == {"ops", "float64_fix", "sync_fix"}


@pytest.mark.slow
def test_memory_fault_removes_the_memory_facts(injected) -> None:
    proc, run_dir = injected["memory"]
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [e["instrument"] for e in _errors(run_dir)] == ["memory"]
    loaded = load_run(run_dir)
    assert loaded.session.steps.count == 16
    diagnosis = diagnose(loaded.session)
    assert "step_count" in diagnosis.facts
    assert not any(f.rule in ("tensor-leak", "memory-pressure", "cache-growth") for f in diagnosis.findings)
    from mpsprofiler.diagnosis.analyzers.leaks import LEAK_FACTS

    assert not set(LEAK_FACTS) & set(diagnosis.facts)


def test_sampled_steps_are_not_warm_up() -> None:
    """Steps 1 and 2 slow only because mpsprof recorded their ops: no warm-up beyond step 0."""
    from tests.unit.test_analyzers import build_session, facts_of, step_rows

    durs = [0.5, 0.9, 0.9, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1]
    plain = facts_of(build_session(rows=step_rows(durs)))
    session = build_session(rows=step_rows(durs))
    session.ops.sampled.update({1, 2})
    facts = facts_of(session)
    assert plain["warmup_steps"] == 3 and plain["warmup_slowest_step_ms"] == 900.0
    assert facts["warmup_steps"] == 1 and facts["warmup_slowest_step_ms"] == 500.0
