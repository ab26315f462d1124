"""The real ``mpsprof`` TUI in a pseudo-terminal: what a user's terminal shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import read_summary
from tui_pty import REPO, TuiProcess


@pytest.mark.slow
def test_quitting_the_tui_prints_the_headless_summary(tmp_path: Path) -> None:
    """After ``q`` the terminal is not left empty: the findings, the run directory and
    the follow-up commands are printed, as at the end of a headless run."""
    run_dir = tmp_path / "run"
    tui = TuiProcess(["run", "-o", str(run_dir), str(REPO / "examples" / "slow_dataloader.py"), "--steps", "30"],
                     size=(80, 24))
    tui.wait_for(lambda: (run_dir / "summary.json").exists(), timeout=90, what="the end of the script")
    tui.send("q")
    assert tui.finish() == 0
    text = tui.after_app()
    assert "── mpsprof" in text, tui.output[-2000:]
    assert "slow_dataloader.py: finished" in text
    assert f"run saved in {run_dir}" in text and f"mpsprof view {run_dir}" in text
    rules = [f["rule"] for f in read_summary(run_dir)["findings"]]
    assert rules and all(f"({rule})" in text for rule in rules)
