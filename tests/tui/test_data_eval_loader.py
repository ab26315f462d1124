"""The Data panel words an evaluation loader's waits as evaluation's, as the reports do.

Training steps never wait for a validation batch: the waits are the evaluation passes
between them. The panel said "per step: wait 31.0 ms + compute 11.2 ms" for a slow
validation loader (its waits spread over the training steps) while the finding and the
reports' table said "Evaluation waited 1.9 s for its DataLoader's batches". A real headless
run of tests/scripts_loader/slow_val_loader.py through the real CLI, opened in the real app.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from helpers import mpsprof_cli
from mpsprofiler.diagnosis import diagnose
from mpsprofiler.session.recording import load_run
from mpsprofiler.tui.app import recorded_app
from tests.tui.test_tui import SIZE, plain

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_data_panel_says_what_evaluation_waited_not_a_per_step_wait(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = mpsprof_cli("run", "--headless", "-o", str(run_dir), str(REPO / "tests" / "scripts_loader" / "slow_val_loader.py"),
                       "--epochs", "3", cwd=tmp_path, timeout=300, stdin=None)
    assert proc.returncode == 0, proc.stderr[-2000:]
    loaded = load_run(run_dir)
    facts = diagnose(loaded.session).facts
    assert facts["stall_subject"] == "evaluation", facts.get("stall_subject")
    app = recorded_app(loaded)
    app.animation_level = "none"
    shown: list[str] = []

    async def main() -> None:
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            await pilot.press("5")
            await pilot.pause()
            shown.append(" ".join(plain(app.query_one("#data-profile")).split()))

    asyncio.run(main())
    (text,) = shown
    assert text.startswith("evaluation loader "), text
    waited = (f"evaluation waited {facts['eval_wait_s']:.1f} s for {facts['eval_batches']} batches "
              f"({facts['eval_wait_share']:.0%} of the steps' time) between training steps, not per step")
    assert waited in text, text
    assert "per step: wait" not in text, text
    assert f"use {facts['train_ms']:.1f} ms" in text, text
