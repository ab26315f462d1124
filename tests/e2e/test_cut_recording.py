"""A recording cut short by the process's death names the highest step it shows.

A script killed with SIGKILL (the out-of-memory killer's signal) or ended with ``os._exit``
skips the probe's last flush: up to half a second of events dies with it. Where its steps
events were lost but op samples of steps 3 and 5 arrived, the texts said "after 0 steps"
("all of its steps" lost, "ended without an exit record after 0 steps"); a SIGKILL was not
said to have lost anything, and the console read "no optimizer step ... seen". Now they use
the highest step any event names: the steps', the op samples', the loss readings'.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from helpers import mpsprof_cli, read_events, read_summary

SCRIPT = Path(__file__).resolve().parent.parent / "scripts_core" / "killed_mid_run.py"


def _killed_run(tmp_path: Path, *args: str) -> tuple[Path, str, list[dict[str, Any]]]:
    run = tmp_path / "run"
    proc = mpsprof_cli("run", "--headless", "-o", str(run), str(SCRIPT), *args, cwd=tmp_path, timeout=180)
    assert "step 6 loss" in proc.stdout, proc.stderr[-2000:]  # it reached the line that ends it
    return run, proc.stderr, read_events(run)


def _without(run: Path, dest: Path, *kinds: str) -> Path:
    """A copy of the recording less the events of ``kinds``: as if the probe's buffer holding
    them had died with the process (the op samples came in an earlier flush)."""
    shutil.copytree(run, dest)
    kept = [e for e in read_events(run) if e.get("k") not in kinds]
    (dest / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in kept))
    (dest / "summary.json").unlink()
    return dest


def _report(run: Path, tmp_path: Path) -> str:
    proc = mpsprof_cli("report", str(run), "--format", "md", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.slow
def test_a_killed_run_names_the_last_step_its_recording_shows(tmp_path: Path) -> None:
    run, stderr, events = _killed_run(tmp_path)
    stepped = max(i for e in events if e["k"] == "steps" for i in e["i"])
    sampled = sorted(e["step"] for e in events if e["k"] == "ops")
    assert sampled and stepped >= sampled[-1], (stepped, sampled)
    (problem,) = read_summary(run)["recording"]["problems"]
    assert problem.startswith("the script was killed by SIGKILL before mpsprof's last events "
                              f"(after step {stepped}, the last the recording shows)"), problem
    assert f"recording   INCOMPLETE: {problem}" in stderr

    # the steps events lost too: the op samples still show how far it got
    lost = _without(run, tmp_path / "no_steps", "steps")
    text = _report(lost, tmp_path)
    assert f"(after step {sampled[-1]}, the last the recording shows)" in text, text
    assert "all of its steps" not in text

    # ... and the exit record (the launcher killed too): the title says so, not "after 0 steps"
    ended = _without(run, tmp_path / "no_exit", "steps", "exit")
    title = _report(ended, tmp_path).splitlines()[0]
    assert f"ended without an exit record after step {sampled[-1]}, the last the recording shows" in title, title


@pytest.mark.slow
def test_os_exit_mid_run_names_the_last_step_its_op_samples_show(tmp_path: Path) -> None:
    """``os._exit(9)`` skips atexit as SIGKILL does: the skipped-shutdown text names the step."""
    run, _, events = _killed_run(tmp_path, "--exit")
    sampled = max(e["step"] for e in events if e["k"] == "ops")
    text = _report(_without(run, tmp_path / "no_steps", "steps"), tmp_path)
    assert "as os.\\_exit(9) does" in text and f"(after step {sampled}, the last the recording shows)" in text, text
