"""Issue 30 on a real GPU: a launch-bound MLP gets the host-bound finding, a CNN fed from
pageable memory the pageable-copies finding (and ``try`` runs its --set), a clean bf16
channels-last CNN with pinned batches and workers no warning.

Marked ``gpu``, skipped without CUDA. ``H30_FIGURES=path`` writes the measured figures
there as JSON (the closing note of the issue quotes them).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from helpers import child_env, loud_rules, mpsprof_cli, read_summary
from mpsprofiler.diagnosis.facts import collect_facts
from mpsprofiler.session.recording import load_run

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

SCRIPTS = Path(__file__).parent.parent / "scripts_gpu"
FIGURES: dict = {}
KEEP = ("device_busy_ms", "device_busy_share", "step_ms", "ops_per_step", "device_us_per_op", "host_us_per_op",
        "device_timed_steps", "device_timing_dropped", "device_timing_off", "larger_batch_factor",
        "larger_batch_peak_mib", "pageable_share", "pageable_mib_per_batch", "data_wait_share", "syncs_per_step")


def _run(tmp_path: Path, name: str, **env: str):
    run_dir = tmp_path / (name + "".join(f"-{k}{v}" for k, v in env.items()))
    proc = mpsprof_cli("run", "--headless", "-o", str(run_dir), str(SCRIPTS / f"{name}.py"),
                       env=child_env(**env), timeout=300, stdin=None)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = read_summary(run_dir)
    facts = collect_facts(load_run(run_dir).session)
    FIGURES[name + "".join(f"_{k}={v}" for k, v in env.items())] = {
        "facts": {k: facts.get(k) for k in KEEP}, "rules": sorted(f["rule"] for f in summary["findings"]),
        "steps_median_s": summary["steps"]["median_s"]}
    _save()
    return summary, facts


def _save() -> None:
    path = os.environ.get("H30_FIGURES")
    if path:
        Path(path).write_text(json.dumps(FIGURES, indent=1, default=str))


def test_launch_bound_mlp_is_host_bound(tmp_path):
    summary, facts = _run(tmp_path, "launch_bound_mlp")
    assert "host-bound" in {f["rule"] for f in summary["findings"]}, summary["findings"]
    assert facts["device_busy_share"] < 0.5 and facts["ops_per_step"] > 100
    # the fix's claim: a larger batch costs the host the same launches (step time grows far less than 8x)
    big, big_facts = _run(tmp_path, "launch_bound_mlp", BATCH=str(16 * (facts["larger_batch_factor"] or 8)))
    assert big["steps"]["median_s"] < 2 * summary["steps"]["median_s"]


def test_pageable_cnn_gets_pin_memory_and_try_runs_it(tmp_path):
    summary, facts = _run(tmp_path, "pageable_cnn")
    finding = next(f for f in summary["findings"] if f["rule"] == "pageable-copies")
    assert "dataloader.1.pin_memory=true" in finding["fix"]
    pinned, pinned_facts = _run(tmp_path, "pageable_cnn", PIN="1")
    assert "pageable-copies" not in {f["rule"] for f in pinned["findings"]} and pinned_facts["pageable_share"] == 0
    proc = mpsprof_cli("try", "--set", "dataloader.1.pin_memory=true", "--steps", "60", "--pairs", "2",
                       "-o", str(tmp_path / "try"), str(SCRIPTS / "pageable_cnn.py"),
                       env=child_env(STEPS="80"), timeout=400, stdin=None)
    FIGURES["try_pin_memory"] = proc.stdout[-3000:]
    _save()
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_clean_bf16_cnn_has_no_warning(tmp_path):
    summary, facts = _run(tmp_path, "clean_bf16_cnn")
    assert loud_rules(summary) == [], summary["findings"]
    assert facts["pageable_share"] == 0
