"""The TUI's ``t`` key: try the selected finding's fix, see before/after beside the panels,
and find the result stored with the run (real run, real Textual pilot)."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

import pytest

from mpsprofiler.experiment.trial import TrialConfig
from mpsprofiler.session.recording import load_runs
from mpsprofiler.tui.app import recorded_app
from mpsprofiler.tui.widgets.experiment import ExperimentPanel
from tests.helpers import mpsprof_cli, sleepy_loader_run


@pytest.mark.slow
@pytest.mark.timeout(1500)  # many full runs: minutes when the machine is shared
def test_t_key_tries_the_stall_fix_and_stores_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 sleepy_loader_recording: Path) -> None:
    run, rule = sleepy_loader_run(sleepy_loader_recording, tmp_path, monkeypatch)  # its own copy, env set
    app = recorded_app(load_runs([run]))
    app.try_config = TrialConfig(steps=8, pairs=2, budget_s=900)
    app.animation_level = "none"

    async def main() -> None:
        async with app.run_test(size=(150, 42)) as pilot:
            await pilot.press("2")
            app.query_one("FindingsPanel").select_rule(rule)  # type: ignore[attr-defined]
            await pilot.pause()
            await pilot.press("t")
            await pilot.pause()
            panel = app.query_one(ExperimentPanel)
            # the change names the loader the finding is about (dataloader.N.num_workers)
            assert re.match(r"Trying (dataloader\.\d+\.)?num_workers=\d+", panel.title), panel.title
            await pilot.press("t")  # a second experiment waits for the first
            deadline = time.monotonic() + 900
            while app._trial is not None and time.monotonic() < deadline:
                await asyncio.sleep(0.5)
            await pilot.pause()
            assert app._trial is None
            # the verdict itself is the CLI tests' business (a loaded machine may blur 2 pairs)
            assert "with num_workers=" in panel.result_text, panel.result_text
            assert "step time   as written" in panel.result_text
            assert "not proven: the run with" not in panel.result_text  # neither side failed
            assert any("pair 1/2  A as written" in line for line in panel.lines)
            await pilot.press("q")

    asyncio.run(main())
    (stored,) = json.loads((run / "experiments.json").read_text())["experiments"]
    # two pairs on a loaded machine may leave the interval wide: "not proven yet" is a verdict too
    assert stored["rule"] == rule and stored["verdict"] in ("faster", "same", "slower", "unproven")
    assert stored["pairs"] == 2
    assert "Tried fixes" in mpsprof_cli("report", str(run), "--format", "md").stdout
