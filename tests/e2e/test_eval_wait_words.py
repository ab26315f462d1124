"""A slow validation loader's stall is worded as evaluation's waiting, not a training step's.

Training steps never wait for a validation batch: the time is the evaluation passes between
them. The evidence said "on average a step waited 10.2 ms for its batch" (all the waits
spread over the steps) and the Markdown report's table headed "Training loader" showed the
validation loader's figures. Real runs of tests/scripts_loader/slow_val_loader.py through
the real CLI.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import mpsprof_cli
from tests.e2e.test_loader_advice import STALLS, profile

SCRIPT = "slow_val_loader.py"


@pytest.mark.slow
def test_an_evaluation_loaders_stall_says_what_evaluation_waited_and_the_report_labels_its_role(
        tmp_path: Path) -> None:
    summary, facts = profile(tmp_path, SCRIPT, "--epochs", "3")
    (stall,) = [f for f in summary["findings"] if f["rule"] in STALLS]
    evidence = " ".join(stall["evidence"].split())
    assert stall["title"].startswith("Evaluation waits for"), stall["title"]
    assert evidence.startswith(f"Evaluation waited {facts['eval_wait_s']:.1f} s for its DataLoader's batches, "
                               f"{facts['eval_wait_share']:.0%} of the"), evidence
    assert f"({facts['eval_batches']} of its batches timed" in evidence, evidence
    assert "a step waited" not in evidence and "the 2nd DataLoader built at" in evidence, evidence
    md = mpsprof_cli("report", str(tmp_path / "run"), "--format", "md").stdout
    assert "| Evaluation loader | Value |" in md and "Training loader" not in md, md
    assert "| Evaluation waited |" in md and "Per step (mean)" not in md, md
