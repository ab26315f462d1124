"""`mpsprof try RUN_DIR` and `mpsprof patch RUN_DIR --prove` run the recorded script again
from the shell they are typed in. A variable set only for the profiled run
(`BATCH=128 mpsprof run train.py`) is gone there, and the trial would time another
workload than the recorded one: they say so (launcher/env_digest.py). The recording keeps
keyed digests of the values, never the values."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from helpers import REPO, child_env, mpsprof_cli
from mpsprofiler.experiment.command import render_result, target_from_session
from mpsprofiler.launcher.env_digest import IGNORED_NAMES, drift, drift_words
from mpsprofiler.report.changes import experiment_lines
from mpsprofiler.results import Results
from mpsprofiler.session.recording import load_runs

SCRIPT = REPO / "tests" / "scripts" / "echo_stdin.py"  # no torch: the digests are the launcher's


def _record(tmp_path: Path, **env: str) -> Path:
    run = tmp_path / "run"
    proc = mpsprof_cli("run", "--headless", "-o", str(run), str(SCRIPT), env=child_env(**env), timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return run


def test_the_recording_keeps_digests_and_a_trial_names_what_differs(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    token = secrets.token_hex(16)
    run = _record(tmp_path, BATCH="128", HF_TOKEN=token, COLUMNS="211")
    for path in run.rglob("*"):  # no file of the run holds the secret's value
        if path.is_file():
            assert token not in path.read_bytes().decode("utf-8", "replace"), path
    session = load_runs([run]).session
    digest = session.run["env_digest"]
    assert {"BATCH", "HF_TOKEN"} <= set(digest) and "COLUMNS" in IGNORED_NAMES and "COLUMNS" not in digest
    assert not [name for name in digest if name.startswith("MPSPROF_")]

    recorded_env = child_env(BATCH="128", HF_TOKEN=token)
    for name, value in recorded_env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("COLUMNS", "80")  # the terminal's width: not a difference
    assert target_from_session(session).env_drift is None

    monkeypatch.delenv("BATCH")
    monkeypatch.setenv("HF_TOKEN", "hf_other7f3a")
    monkeypatch.setenv("DATA_DIR", "/elsewhere")
    note = target_from_session(session).env_drift
    assert note is not None
    assert "BATCH is set for the recorded run and not now" in note
    assert "HF_TOKEN is set to another value now" in note and "7f3a" not in note
    assert "DATA_DIR is set now and not for the recorded run" in note
    assert "--set env.NAME=VALUE" in note

    # what the trial's result says, in its text and in the report's line for it
    result = {"label": "num_workers=2", "headline": "not proven yet", "env_drift": note, "dir": "x", "seconds": 1}
    assert f"  caution     {note}" in render_result(result)
    assert experiment_lines(Results(summary={}, experiments=[result]))[0].endswith(  # type: ignore[typeddict-item]
        "(run from another environment than the recorded run's)")


def test_many_names_are_cut_and_a_recording_without_digests_says_nothing() -> None:
    names = [f"V{i}" for i in range(9)]
    words = drift_words(drift({n: "0" for n in names}, {}))
    assert words is not None and "V0, V1, V2, V3, V4, V5 and 3 more are set for the recorded run" in words
    assert drift_words(drift({}, {})) is None


def test_a_version_managers_per_directory_bookkeeping_is_no_drift() -> None:
    """pyenv's shims set PYENV_DIR to the directory python runs in: `mpsprof run` from a
    project and `mpsprof try RUN_DIR` from elsewhere were said to differ (seen for real)."""
    from mpsprofiler.launcher.env_digest import digest

    recorded = digest({"PYENV_DIR": "/home/me/project", "CONDA_SHLVL": "1", "OMP_NUM_THREADS": "4"})
    assert drift_words(drift(recorded, {"PYENV_DIR": "/tmp", "CONDA_SHLVL": "2", "OMP_NUM_THREADS": "4"})) is None
    assert "OMP_NUM_THREADS" in (drift_words(drift(recorded, {"PYENV_DIR": "/tmp"})) or "")
