"""The core path end to end: real scripts through the real CLI, measurements checked."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from helpers import child_env, mpsprof_cli, read_summary
from mpsprofiler.results import build_results
from mpsprofiler.session.recording import load_run

SCRIPTS = Path(__file__).parent.parent / "scripts_core"


def mpsprof_run(tmp_path: Path, script: Path, *args: str, env: dict | None = None) -> tuple[subprocess.CompletedProcess, dict, Path]:
    run_dir = tmp_path / "run"
    proc = mpsprof_cli("run", "--headless", "-o", str(run_dir), str(script), *args,
                       env=child_env(**(env or {})), timeout=120)
    return proc, read_summary(run_dir, missing_ok=True), run_dir


@pytest.mark.slow
def test_two_optimizers_count_as_one_step(tmp_path):
    proc, summary, _ = mpsprof_run(tmp_path, SCRIPTS / "gan_two_optimizers.py")
    assert proc.returncode == 0, proc.stderr
    assert summary["steps"]["count"] == 25
    assert summary["steps"]["mode"] == "optimizer"
    # said, so a count of optimizer steps (Lightning's global_step counts each) is not taken for ours
    assert summary["steps"]["optimizers"] == 2
    assert "from optimizer steps, 2 optimizers stepping in each)" in proc.stderr


@pytest.mark.slow
def test_loop_without_optimizer_counts_batches(tmp_path):
    proc, summary, _ = mpsprof_run(tmp_path, SCRIPTS / "no_optimizer.py")
    assert proc.returncode == 0, proc.stderr
    # 20 batches: a step starts at every batch after the first, the last closes at exit
    assert summary["steps"]["mode"] == "dataloader"
    assert summary["steps"]["count"] in (19, 20)
    assert summary["dataloaders"][0]["batch_size"] == 4
    assert summary["dataloaders"][0]["len"] == 20


def test_manual_steps(tmp_path):
    proc, summary, _ = mpsprof_run(tmp_path, SCRIPTS / "manual_steps.py")
    assert proc.returncode == 0, proc.stderr
    assert summary["steps"]["count"] == 12
    assert summary["steps"]["mode"] == "manual"
    assert 0.0015 < summary["steps"]["median_s"] < 0.05


@pytest.fixture(scope="module")
def sleepy_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, dict, Path]:
    """30 ms of loading per 10 ms of compute, 30 steps: measured times (the tests that read
    it are serial) and a data-loader stall finding to replay."""
    return mpsprof_run(tmp_path_factory.mktemp("sleepy"), SCRIPTS / "sleepy_dataset.py",
                       env={"SLEEP": "0.03", "WORK": "0.01"})


@pytest.mark.slow
@pytest.mark.serial
def test_data_wait_matches_the_sleeps(sleepy_run):
    """30 ms of loading per 10 ms of compute: 75% data wait, within 20%."""
    proc, summary, run_dir = sleepy_run
    assert proc.returncode == 0, proc.stderr
    steps = summary["steps"]
    assert steps["count"] == 30
    expected = 0.03 / 0.04
    assert steps["data_wait_share"] == pytest.approx(expected, rel=0.2)
    assert steps["median_s"] == pytest.approx(0.04, rel=0.2)
    assert summary["dataloaders"][0]["num_workers"] == 0


@pytest.mark.slow
def test_spawn_workers(tmp_path):
    """macOS starts DataLoader workers with spawn: the script runs, and the workers hide the wait."""
    proc, summary, _ = mpsprof_run(
        tmp_path, SCRIPTS / "sleepy_dataset.py",
        env={"START_METHOD": "spawn", "WORKERS": "2", "SLEEP": "0.005", "WORK": "0.01", "STEPS": "40"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "sum 3120.0" in proc.stdout
    assert summary["steps"]["count"] == 40
    loader = summary["dataloaders"][0]
    assert loader["num_workers"] == 2 and loader["multiprocessing_context"] == "spawn"


@pytest.mark.slow
@pytest.mark.serial  # reads the serial tests' run (its own verdict measures no time)
def test_recording_replays_to_the_same_summary(sleepy_run):
    proc, summary, run_dir = sleepy_run
    assert proc.returncode == 0, proc.stderr
    assert summary["findings"]  # something to replay beyond the figures
    replayed = build_results(load_run(run_dir).session).document()
    assert replayed == summary


def test_headless_summary_and_script_output(tmp_path):
    proc, summary, run_dir = mpsprof_run(tmp_path, SCRIPTS / "sleepy_dataset.py", env={"SLEEP": "0.001", "WORK": "0.001", "STEPS": "5"})
    assert proc.stdout == "sum 40.0\n"  # the script's stdout passes through untouched
    assert "── mpsprof" in proc.stderr and str(run_dir) in proc.stderr
    assert summary["status"] == "finished" and summary["exit"]["returncode"] == 0
    assert summary["device"]["kind"] == "cpu"
    assert summary["memory"]["peak_rss"] > 10 * 2**20


def test_the_end_of_run_summary_says_what_op_accounting_cost(tmp_path):
    """The run says what its op accounting cost, as its reports do (issue 34), from the
    summary's own figures; a run without op accounting says nothing of it."""
    env = {"SLEEP": "0.001", "WORK": "0.001", "STEPS": "12"}
    proc, summary, _ = mpsprof_run(tmp_path, SCRIPTS / "sleepy_dataset.py", env=env)
    assert proc.returncode == 0, proc.stderr
    ops = summary["ops"]
    assert ops["sampled_steps"] >= 1 and ops["cost_s"] > 0
    line = next(x for x in proc.stderr.splitlines() if x.startswith("profiler    op accounting: "))
    assert line.startswith(f"profiler    op accounting: {ops['sampled_steps']} sampled steps, {ops['cost_s'] * 1e3:.0f} ms (")
    assert "of the training time" in line
    proc = mpsprof_cli("run", "--headless", "--no-ops", "-o", str(tmp_path / "no-ops"), str(SCRIPTS / "sleepy_dataset.py"),
                       env=child_env(**env), timeout=120)
    assert proc.returncode == 0 and "── mpsprof" in proc.stderr, proc.stderr
    assert "op accounting" not in proc.stderr, proc.stderr
