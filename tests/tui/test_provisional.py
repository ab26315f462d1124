"""Provisional findings: a live run shows a clear problem after a handful of steps,
marked provisional until the rule's own step count confirms it."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from mpsprofiler import events
from mpsprofiler.diagnosis import PROVISIONAL_MIN_STEPS, diagnose
from mpsprofiler.launcher.child import RunSpec
from mpsprofiler.session.recording import iter_recording
from mpsprofiler.session.session import Session
from mpsprofiler.tui.app import MpsprofApp

REPO = Path(__file__).resolve().parents[2]
RECORDING = REPO / "tests" / "fixtures" / "recordings" / "slow_dataloader" / "events.jsonl"
RULE = "dataloader-stall-critical"


def session_until(steady: int) -> Session:
    """The real slow-DataLoader recording, fed until ``steady`` steady steps are in."""
    session = Session()
    for event in iter_recording(RECORDING, events.DecodeReport()):
        session.feed(event)
        if session.steps.steady_count >= steady:
            break
    return session


def test_clear_evidence_shows_provisionally_then_confirms() -> None:
    early = session_until(8)
    assert PROVISIONAL_MIN_STEPS <= early.steps.steady_count < 20
    assert RULE not in {f.rule for f in diagnose(early).findings}  # the rule wants 20 steady steps
    shown = {f.rule: f for f in diagnose(early, provisional=True).findings}
    assert shown[RULE].provisional and shown[RULE].facts["steady_steps"] == early.steps.steady_count
    too_early = session_until(PROVISIONAL_MIN_STEPS - 1)
    assert RULE not in {f.rule for f in diagnose(too_early, provisional=True).findings}
    full = session_until(40)
    confirmed = {f.rule: f for f in diagnose(full, provisional=True).findings}
    assert not confirmed[RULE].provisional
    assert "provisional" not in confirmed[RULE].to_dict()


@pytest.mark.serial
@pytest.mark.slow
def test_live_tui_marks_the_first_finding_provisional(tmp_path: Path) -> None:
    """The real example at ~5 steps/s under the live app: the stall shows as provisional
    before step 20, then confirmed; the final findings are never provisional."""
    spec = RunSpec(target=str(REPO / "examples" / "slow_dataloader.py"),
                   args=["--steps", "45", "--delay", "0.012"], run_dir=tmp_path / "run", capture_output=True)
    spec.run_dir.mkdir()
    app = MpsprofApp(Session(), [], spec=spec, run_dir=spec.run_dir)
    seen: list[tuple[int, bool]] = []

    async def main() -> None:
        async with app.run_test(size=(130, 40)) as pilot:
            deadline = time.monotonic() + 120
            while app.results is None and time.monotonic() < deadline:
                for f in app.state.findings:
                    if f.rule == RULE:
                        seen.append((app.session.steps.steady_count, f.provisional))
                await pilot.pause(0.2)
            assert app.results is not None

    asyncio.run(main())
    assert seen and seen[0][1], f"the first sighting was not provisional: {seen[:3]}"
    assert seen[0][0] < 20
    assert any(not provisional for _n, provisional in seen)
    assert all(not f.provisional for f in app.results.findings)


NO_STEP = "no-step-signal"


@pytest.mark.slow
def test_live_run_does_not_show_no_steps_while_steps_come(tmp_path: Path) -> None:
    """A script that imports torch, spends 3 s, then 1.5 s in its first step, then 60 steps
    of 50 ms (3 s: long enough for a live diagnosis with steps on a loaded machine): the live view
    must not say "No training steps seen" (it used to from about 3 s on, and the finding
    stayed shown while the steps were counted)."""
    spec = RunSpec(target=str(REPO / "tests" / "scripts_loops" / "late_first_step.py"), args=[],
                   run_dir=tmp_path / "run", capture_output=True)
    spec.run_dir.mkdir()
    app = MpsprofApp(Session(), [], spec=spec, run_dir=spec.run_dir)
    shown: list[int] = []  # step counts at which the live view showed the finding
    diagnosed_with_steps = 0
    first_with_steps: int | None = None  # the session's version when a step was first seen

    async def main() -> None:
        nonlocal diagnosed_with_steps, first_with_steps
        async with app.run_test(size=(130, 40)) as pilot:
            deadline = time.monotonic() + 120
            while app.results is None and time.monotonic() < deadline:
                if app.state.running:
                    rules = {f.rule for f in app.state.findings}
                    if NO_STEP in rules:
                        shown.append(app.session.steps.count)
                    if app.session.steps.count and first_with_steps is None:
                        first_with_steps = app.session.version
                    # a live diagnosis of a session that had steps (versions only grow; the
                    # diagnosis need not be of the very latest one: steps come every 50 ms)
                    if first_with_steps is not None and app._diagnosed_version >= first_with_steps:
                        diagnosed_with_steps += 1
                await pilot.pause(0.2)
            assert app.results is not None

    asyncio.run(main())
    assert not shown, f"'No training steps seen' shown live (step counts {shown[:5]})"
    assert diagnosed_with_steps, "no live diagnosis ran once the steps were counted"
    assert app.session.steps.count == 60
    assert NO_STEP not in {f.rule for f in app.results.findings}
