"""The run directory has one owner (:mod:`mpsprofiler.rundir`): its file names, its default
name, and the experiments stored beside a run, which ``build_results`` attaches once for
every view (``report``, ``view``, the live TUI's end), so none patches them in afterwards."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from helpers import mpsprof_cli
from mpsprofiler import rundir
from mpsprofiler.results import build_results, finish_run
from mpsprofiler.session.recording import load_run

REPO = Path(__file__).resolve().parents[2]
RECORDING = REPO / "tests" / "fixtures" / "recordings" / "slow_dataloader"
STORED = {"label": "num_workers=4", "verdict": "faster", "headline": "proven: 2.5x faster with num_workers=4",
          "speedup": 2.5, "pairs": 3}


def _run_with_experiment(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(RECORDING, run)
    assert rundir.append_experiment(run, dict(STORED)) is None
    return run


def test_build_results_attaches_the_stored_experiments(tmp_path: Path) -> None:
    run = _run_with_experiment(tmp_path)
    loaded = load_run(run)
    assert [e["label"] for e in build_results(loaded.session, (), run).experiments] == ["num_workers=4"]
    assert build_results(loaded.session, ()).experiments == []  # no directory, nothing read
    # the end of a run writes them into summary.json too
    finished = finish_run(loaded.session, (), run)
    assert finished.write_error is None
    doc = json.loads((run / rundir.SUMMARY_FILE).read_text())
    assert [e["label"] for e in doc["experiments"]] == ["num_workers=4"]


def test_report_shows_the_experiment_without_patching(tmp_path: Path) -> None:
    run = _run_with_experiment(tmp_path)
    out = mpsprof_cli("report", str(run), "--format", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert [e["headline"] for e in doc["experiments"]] == [STORED["headline"]]


def test_file_names_are_spelt_in_one_place() -> None:
    """``events.jsonl`` and the other run-directory names appear as literals only in rundir.py."""
    names = [rundir.EVENTS_FILE, rundir.SUMMARY_FILE, rundir.OUTPUT_FILE, rundir.EXPERIMENTS_FILE]
    offenders = []
    for path in (REPO / "mpsprofiler").rglob("*.py"):
        if path.name == "rundir.py":
            continue
        text = path.read_text(encoding="utf-8")
        offenders += [f"{path.relative_to(REPO)}: {name}" for name in names
                      if re.search(r"[\"']" + re.escape(name) + r"[\"']", text)]
    assert not offenders, offenders


def test_default_names_claim_fresh_directories(tmp_path: Path) -> None:
    first = rundir.default_run_dir("scripts/train.py", base=tmp_path)
    assert first.parent == tmp_path and first.name.endswith("-train")
    a, error_a = rundir.prepare_run_dir(first, unique=True)
    b, error_b = rundir.prepare_run_dir(first, unique=True)
    assert error_a is None and error_b is None and a != b and a is not None and b is not None
    assert rundir.is_run_dir(RECORDING) and not rundir.is_run_dir(a)
    assert rundir.fix_file(a, "dataloader/stall critical", ".patch").name == "fix-dataloader_stall_critical.patch"
