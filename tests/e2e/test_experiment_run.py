"""``mpsprof run --set NAME=VALUE`` and ``--max-steps``: changes without editing the script,
and short runs that end cleanly, through the real CLI on real training scripts."""

from __future__ import annotations

from pathlib import Path

import pytest

from mpsprofiler.settings import SettingError, describe, merge, parse_settings
from tests.helpers import child_env, mpsprof_cli, read_summary, run_python

TRY = Path(__file__).resolve().parent.parent / "scripts_try"


def test_settings_parse_and_describe() -> None:
    s = parse_settings(["dataloader.num_workers=4", "dataloader.2.pin_memory=off", "env.OMP_NUM_THREADS=2",
                        "torch.num_threads=1", "memory.empty_cache_every=10"])
    assert s == {"dataloader": {"*": {"num_workers": 4}, "2": {"pin_memory": False}},
                 "env": {"OMP_NUM_THREADS": "2"}, "torch": {"num_threads": 1}, "memory": {"empty_cache_every": 10}}
    assert describe(s) == ["dataloader.num_workers=4", "dataloader.2.pin_memory=false", "env.OMP_NUM_THREADS=2",
                           "torch.num_threads=1", "memory.empty_cache_every=10"]
    assert parse_settings(describe(s)) == s
    assert merge(s, {"dataloader": {"*": {"num_workers": 2}}})["dataloader"]["*"] == {"num_workers": 2}


@pytest.mark.parametrize("item, words", [
    ("dataloader.num_workrs=2", "unknown DataLoader setting 'num_workrs'"),
    ("dataloader.num_workers=-1", "at least 0"),
    ("dataloader.num_workers=two", "whole number"),
    ("dataloader.pin_memory=maybe", "true or false"),
    ("dataloader.0.num_workers=1", "ID = 1 for the first loader"),
    ("env.LD_PRELOAD=x", "mpsprof sets only these variables"),
    ("env.PYTORCH_MPS_HIGH_WATERMARK_RATIO=3", "between 0 and 2"),
    ("torch.threads=2", "unknown name"),
    ("num_workers", "expected NAME=VALUE"),
])
def test_settings_refuse_unknown_names_and_bad_values(item: str, words: str) -> None:
    with pytest.raises(SettingError, match=words.replace("(", r"\(").replace(")", r"\)")):
        parse_settings([item])


def test_cli_refuses_bad_set_before_running(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    script = tmp_path / "s.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    proc = mpsprof_cli("run", "--headless", "-o", str(tmp_path / "run"), "--set", "dataloader.workers=2", str(script))
    assert proc.returncode == 2
    assert "unknown DataLoader setting 'workers'" in proc.stderr
    assert not marker.exists()
    proc = mpsprof_cli("run", "--headless", "--max-steps", "0", str(script))
    assert proc.returncode == 2 and "--max-steps must be at least 1" in proc.stderr


@pytest.mark.slow
@pytest.mark.timeout(1500)  # many full runs: minutes when the machine is shared
def test_set_num_workers_and_max_steps(tmp_path: Path) -> None:
    """The loader gets the workers asked for, the run stops after exactly 8 steps with
    exit status 0, and the summary says both."""
    run = tmp_path / "run"
    proc = mpsprof_cli("run", "--headless", "-o", str(run), "--set", "dataloader.num_workers=2",
                       "--set", "dataloader.persistent_workers=true", "--max-steps", "8",
                       str(TRY / "sleepy_loader.py"), env=child_env(STEPS="40"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = read_summary(run)
    assert summary["status"] == "cut"
    assert summary["cut"]["steps"] == 8 and summary["cut"]["reason"] == "max_steps"
    assert summary["steps"]["count"] == 8
    assert summary["exit"]["returncode"] == 0
    assert summary["dataloaders"][0]["num_workers"] == 2
    assert summary["dataloaders"][0]["persistent_workers"] is True
    applied = {(a["name"], a["before"], a["after"]) for a in summary["changes"]["applied"]}
    assert ("num_workers", 0, 2) in applied and ("persistent_workers", False, True) in applied
    assert summary["changes"]["asked"] == ["dataloader.num_workers=2", "dataloader.persistent_workers=true"]
    assert "cut after 8 steps (--max-steps 8)" in proc.stderr
    assert "dataloader 1: num_workers 0 → 2" in proc.stderr
    assert "step 5 loss" in proc.stdout and "workers" not in proc.stdout  # cut before the end
    report = mpsprof_cli("report", str(run), "--format", "md")
    assert "num_workers 0 → 2" in report.stdout and "cut after 8 steps" in report.stdout
    html = mpsprof_cli("report", str(run), "--format", "html")
    assert "num_workers 0 → 2" in html.stdout and "Changed for this run" in html.stdout


@pytest.mark.slow
@pytest.mark.timeout(1500)  # many full runs: minutes when the machine is shared
def test_threads_env_and_max_seconds(tmp_path: Path) -> None:
    """torch.num_threads wins over the script's own set_num_threads; env.* reaches the
    script; persistent_workers without workers is refused with its reason; a time limit cuts."""
    run = tmp_path / "run"
    proc = mpsprof_cli("run", "--headless", "-o", str(run), "--set", "torch.num_threads=1",
                       "--set", "env.OMP_NUM_THREADS=3", "--set", "dataloader.persistent_workers=true",
                       "--set", "memory.empty_cache_every=2", str(TRY / "no_guard.py"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "threads 1" in proc.stdout
    summary = read_summary(run)
    skipped = summary["changes"]["skipped"]
    assert any(s["setting"] == "persistent_workers=True" and "num_workers > 0" in s["reason"] for s in skipped)
    assert any("set_num_threads(2)" in s["setting"] for s in skipped)
    assert "env.OMP_NUM_THREADS=3" in summary["changes"]["asked"]
    run2 = tmp_path / "run2"
    proc = mpsprof_cli("run", "--headless", "-o", str(run2), "--max-seconds", "0.3", str(TRY / "sleepy_loader.py"),
                       env=child_env(STEPS="200"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = read_summary(run2)
    assert summary["status"] == "cut" and summary["cut"]["reason"] == "max_seconds"
    assert 3 <= summary["steps"]["count"] < 200


@pytest.mark.slow
@pytest.mark.timeout(1500)  # many full runs: minutes when the machine is shared
def test_num_workers_refused_without_main_guard_under_spawn(tmp_path: Path) -> None:
    """Spawned workers would re-run a guard-less script: mpsprof keeps num_workers=0,
    says why, and the script runs exactly as without mpsprof."""
    run = tmp_path / "run"
    plain = run_python([str(TRY / "no_guard.py")])
    proc = mpsprof_cli("run", "--headless", "-o", str(run), "--set", "dataloader.num_workers=2", str(TRY / "no_guard.py"))
    assert proc.returncode == plain.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == plain.stdout.decode()
    summary = read_summary(run)
    assert summary["status"] == "finished" and summary["cut"] is None
    assert summary["dataloaders"][0]["num_workers"] == 0
    (skip,) = summary["changes"]["skipped"]
    assert skip["setting"] == "num_workers=2" and "__main__" in skip["reason"] and "spawn" in skip["reason"]
    assert "NOT applied num_workers=2" in proc.stderr
