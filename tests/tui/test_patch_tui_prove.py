"""The TUI's patch screen proves its patch (issue 31): ``p`` on a finding shows the diff,
``P`` runs the same proof as ``mpsprof patch --prove`` on a thread worker while the app
stays usable, the progress and the verdict show in the screen and beside the panels, and
the verdict is stored with the run where ``report`` reads it (a real recorded run, a real
proof, the real Textual pilot)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from mpsprofiler.experiment.trial import TrialConfig
from mpsprofiler.patch.prove import PatchTrial
from mpsprofiler.session.recording import load_runs
from mpsprofiler.tui.app import recorded_app
from mpsprofiler.tui.patch_key import PatchScreen
from mpsprofiler.tui.widgets.experiment import ExperimentPanel
from tests.helpers import REPO, SLEEPY_LOADER_ENV, child_env, mpsprof_cli, sleepy_loader_run

SCRIPT = REPO / "tests" / "scripts_try" / "sleepy_loader.py"


@pytest.mark.slow
@pytest.mark.timeout(900)  # (the shared recording and) 4 short runs: under a minute on a shared 2-core machine
def test_p_then_shift_p_proves_the_patch_in_the_background(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           sleepy_loader_recording: Path) -> None:
    run, rule = sleepy_loader_run(sleepy_loader_recording, tmp_path, monkeypatch)  # its own copy, env set
    app = recorded_app(load_runs([run]))
    app.prove_config = TrialConfig(steps=8, pairs=2, budget_s=600, min_pairs=2)
    app.animation_level = "none"
    seen: dict[str, object] = {}

    async def main() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("2")
            app.query_one("FindingsPanel").select_rule(rule)  # type: ignore[attr-defined]
            await pilot.pause()
            await pilot.press("p")
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, PatchScreen), screen
            # wrapped one argument a line: the added keyword takes the line past 100 columns
            assert "+    loader = DataLoader(\n+        SlowImages(),\n+        batch_size=2,\n" in screen.text, screen.text
            assert "+        num_workers=" in screen.text, screen.text
            assert str(screen.query_one("#prove").label) == "Prove it (P): 2 A/B pairs x 8 steps, at most 600 s"  # type: ignore[attr-defined]
            button = screen.query_one("#prove")  # in view at 100x30, not under the box's bottom border
            assert screen.get_widget_at(button.region.x + 1, button.region.y)[0] is button, button.region
            await pilot.press("P")
            await pilot.pause()
            # the proof runs on a worker thread: the key came back at once, the trial still going
            assert isinstance(app._trial, PatchTrial) and screen.title_text == f"Proving the patch for {rule}"
            assert screen.query_one("#prove").disabled  # one proof at a time
            await pilot.press("escape", "3")  # the app answers keys while it runs
            await pilot.pause()
            active = app.query_one("TabbedContent").active  # type: ignore[attr-defined]
            assert not isinstance(app.screen, PatchScreen) and active == "ops", active
            assert app._trial is not None, "the proof ended before the app was used beside it: too short to tell"
            await pilot.press("t")  # a second experiment waits for the proof
            await pilot.press("2")
            app.query_one("FindingsPanel").select_rule(rule)  # type: ignore[attr-defined]
            await pilot.press("p")  # reopened while it runs: the progress so far is there
            await pilot.pause()
            assert isinstance(app.screen, PatchScreen) and app.screen.title_text.startswith("Proving")
            deadline = time.monotonic() + 800
            while app._trial is not None and time.monotonic() < deadline:
                await asyncio.sleep(0.5)
            await pilot.pause()
            assert app._trial is None
            seen["screen"] = app.screen.result_text  # type: ignore[attr-defined]
            seen["panel"] = app.query_one(ExperimentPanel).result_text
            seen["lines"] = list(app.query_one(ExperimentPanel).lines)
            seen["button"] = app.screen.query_one("#prove").disabled
            await pilot.press("escape", "q")

    asyncio.run(main())
    shown = str(seen["screen"])
    assert "step time   as written" in shown and "loss        equivalent" in shown, shown
    assert "verdict     " in shown and "stored with the run" in shown, shown
    assert seen["panel"] == shown and seen["button"] is False
    assert any(line.startswith("pair 2/2") for line in seen["lines"]), seen["lines"]  # type: ignore[attr-defined]
    stored = json.loads((run / "experiments.json").read_text())["experiments"]
    assert len(stored) == 1, stored  # `t` did not start a second experiment beside the proof
    (result,) = stored
    assert result["kind"] == "patch" and result["rule"] == rule and result["pairs"] == 2, result
    # two pairs on a shared machine may leave the interval wide; the verdict itself is the
    # CLI test's (tests/e2e/test_patch_prove_e2e.py): here both sides ran and were compared
    assert result["patch_verdict"] in ("faster", "not proven") and not result.get("failure"), result
    assert f"verdict     {result['patch_verdict']}" in shown
    report = mpsprof_cli("report", str(run), "--format", "md", env=child_env(**SLEEPY_LOADER_ENV))
    assert result["headline"].replace(">", "\\>") in report.stdout, report.stdout[-3000:]
