"""What the summary's batch counts count, on a k-fold script (a new model, optimizer and
pair of loaders per fold, a validation pass after each fold's training).

``steps.batches`` (765 in a sweep's k-fold run) and the loaders' own totals (770) differed:
no batch was lost, the last fold's validation pass comes after the last optimizer step and
belongs to no step. The JSON report's schema says so for each figure.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers import child_env, mpsprof_cli, read_summary

SCRIPT = Path(__file__).resolve().parent.parent / "scripts_loops" / "kfold_models.py"
SCHEMA = Path(__file__).resolve().parent.parent.parent / "mpsprofiler" / "report" / "schema.json"


@pytest.mark.slow
def test_k_fold_batches_of_the_steps_and_of_the_loaders(tmp_path: Path) -> None:
    """4 folds x 2 epochs x 15 training batches, and 3 validation batches after each fold:
    the steps took the training batches and the first 3 folds' validation batches (fetched
    between two steps); the loaders gave all of them, the last fold's 3 after the last step."""
    run = tmp_path / "run"
    proc = mpsprof_cli("run", "--headless", "-o", str(run), str(SCRIPT), cwd=tmp_path, env=child_env(), timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    updates = int(re.search(r"optimizer steps (\d+)", proc.stdout).group(1))  # type: ignore[union-attr]
    summary = read_summary(run)
    train, val = sorted(summary["dataloaders"], key=lambda d: d["line"])
    per_fold = val["len"]
    folds = val["iters"]
    assert train["fetches"] + train["first_fetches"] == updates  # one batch a step
    assert val["fetches"] + val["first_fetches"] == per_fold * folds
    assert summary["steps"]["batches"] == updates + per_fold * (folds - 1)
    assert val["after_fetches"] == per_fold - 1  # the last pass's first batch is a first fetch

    described = json.loads(SCHEMA.read_text())["properties"]["steps"]["properties"]["batches"]["description"]
    assert "after the last step" in described and "first_fetches" in described


@pytest.mark.slow
def test_the_batches_after_the_last_step_count_the_last_passs_first_one(tmp_path: Path) -> None:
    """The last fold's validation pass begins after the last optimizer step: its 3 batches
    are all after it, the first one (a first fetch) included, so the loaders' batches less
    those after the last step are the steps' batches. The first was missing from the
    counts after the last step: 2 of the pass's 3 (probe/loader_sites.py, at exit)."""
    run = tmp_path / "run"
    proc = mpsprof_cli("run", "--headless", "-o", str(run), str(SCRIPT), cwd=tmp_path, env=child_env(), timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = read_summary(run)
    train, val = sorted(summary["dataloaders"], key=lambda d: d["line"])
    assert val["after_fetches"] + val["after_first_fetches"] == val["len"], val
    assert val["after_first_fetches"] == 1 and not train.get("after_first_fetches"), (train, val)
    after = sum((d.get("after_fetches") or 0) + (d.get("after_first_fetches") or 0) for d in summary["dataloaders"])
    given = sum(d["fetches"] + d["first_fetches"] for d in summary["dataloaders"])
    assert given - after == summary["steps"]["batches"], (given, after, summary["steps"])
