"""One way to finish a run: build the results, then write summary.json if the recording survived."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from mpsprofiler.results import finish_run
from mpsprofiler.session.recording import load_run

RECORDING = Path(__file__).parent.parent / "fixtures" / "recordings" / "slow_dataloader"
PACKAGE = Path(__file__).resolve().parents[2] / "mpsprofiler"


def test_a_finished_run_writes_its_summary_only_when_the_recording_survived(tmp_path: Path) -> None:
    session = load_run(RECORDING).session
    ok = finish_run(session, [], tmp_path)
    assert ok.summary_dir == tmp_path and ok.write_error is None and ok.diagnosis_error is None
    assert json.loads((tmp_path / "summary.json").read_text())["findings"] == ok.results.document()["findings"]
    assert ok.results.findings, "the slow_dataloader recording has findings"

    broken = tmp_path / "broken"
    broken.mkdir()
    lost = finish_run(session, [], broken, "recording stopped: No space left on device")
    assert lost.summary_dir is None and not (broken / "summary.json").exists()
    assert [f.rule for f in lost.results.findings] == [f.rule for f in ok.results.findings]
    assert finish_run(session, [], None).summary_dir is None


def test_only_results_writes_the_summary() -> None:
    """headless, the live TUI and its exit all go through finish_run: no second copy of the check."""
    callers = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "write_summary":
                callers.append(path.relative_to(PACKAGE).as_posix())
    assert callers == ["results.py"]
