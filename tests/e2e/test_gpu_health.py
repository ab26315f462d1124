"""Issue 30 on a real GPU: the loss ring (probe/loss_ring.py) names the exact step of a
NaN on CUDA with no sync of its own, and the op sampler times host-to-device copies
(probe/copies.py CopyTimer) for the pageable-copies finding.

Marked ``gpu``, skipped without CUDA. ``H30_FIGURES=path`` writes the measured figures
there as JSON (the closing note of the issue quotes them).
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import pytest
import torch

from helpers import child_env, mpsprof_cli, read_summary
from mpsprofiler.diagnosis.facts import collect_facts
from mpsprofiler.probe.health import LossWatch
from mpsprofiler.session.recording import load_run

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

SCRIPTS = Path(__file__).parent.parent / "scripts_gpu"
FIGURES: dict = {}


def _save() -> None:
    path = os.environ.get("H30_FIGURES")
    if path:
        Path(path).write_text(json.dumps(FIGURES, indent=1, default=str))


def _run(tmp_path: Path, name: str, **env: str):
    run_dir = tmp_path / (name + "".join(f"-{k}{v}" for k, v in env.items()))
    proc = mpsprof_cli("run", "--headless", "-o", str(run_dir), str(SCRIPTS / f"{name}.py"),
                       env=child_env(**env), timeout=300, stdin=None)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return read_summary(run_dir), collect_facts(load_run(run_dir).session)


def test_nan_named_at_its_exact_step_on_cuda(tmp_path):
    """Op accounting on, default options: the NaN of step 37 is named at step 37, read
    from the ring (``every step``), not at the next op-sampled step."""
    summary, facts = _run(tmp_path, "nan_at_step")
    FIGURES["nan_at_step"] = {k: facts.get(k) for k in (
        "nonfinite_loss_step", "nonfinite_loss_checked", "last_finite_loss_step", "loss_checks", "loss_checked")}
    _save()
    finding = next(f for f in summary["findings"] if f["rule"] == "nonfinite-loss")
    assert "step 37" in finding["title"], finding["title"]
    assert facts["nonfinite_loss_step"] == 37 and facts["nonfinite_loss_checked"] == "every step"
    assert facts["last_finite_loss_step"] == 36
    clean, clean_facts = _run(tmp_path, "nan_at_step", CLEAN="1")
    assert "nonfinite-loss" not in {f["rule"] for f in clean["findings"]}
    # every loss of the warm-up read, then one step in EVERY once steady (probe/backward_sampling.py)
    from mpsprofiler.probe.backward_sampling import EVERY, WARM_STEPS

    FIGURES["clean"] = {k: clean_facts.get(k) for k in (
        "loss_checks", "loss_checked", "loss_check_steps", "loss_check_sampled_from", "loss_check_every")}
    _save()
    assert clean_facts["loss_check_steps"] == 300 and clean_facts["loss_checked"] == "sampled steps"
    assert clean_facts["loss_check_sampled_from"] == WARM_STEPS + 1 and clean_facts["loss_check_every"] == EVERY
    assert WARM_STEPS + (300 - WARM_STEPS) // EVERY - 1 <= clean_facts["loss_checks"] < 300 // 2


def test_ring_adds_no_sync_and_little_host_time():
    """The per-step path on a real CUDA loss under ``torch.cuda.set_sync_debug_mode("error")``
    (a sync raises, and would switch the ring off): every loss read, the NaN at its step;
    the host time per backward is a few microseconds."""
    sent: list[dict] = []
    step = [0]
    watch = LossWatch(lambda kind, **f: sent.append(f), lambda: step[0], lambda: False)
    w = torch.ones(64, 64, device="cuda", requires_grad=True)
    x = torch.randn(64, 64, device="cuda")
    losses = [(x @ w).mean() for _ in range(8)]
    torch.cuda.synchronize()
    n, nan_at = 2000, 1500
    bad = (x @ w).mean() * float("nan")
    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")
    try:
        t0 = time.perf_counter()
        for i in range(n):
            step[0] = i
            watch.on_backward((bad if i == nan_at else losses[i % 8],))
        host_us = (time.perf_counter() - t0) / n * 1e6
    finally:
        torch.cuda.set_sync_debug_mode(previous)
    assert not watch.ring_off and watch.ring is not None
    torch.cuda.synchronize()
    watch.close()
    FIGURES["ring_host_us_per_step"] = round(host_us, 2)
    _save()
    assert sent and sent[0]["step"] == nan_at and sent[0]["checked"] == "every step"
    assert sent[0]["last_finite_step"] == nan_at - 1 and math.isfinite(sent[0]["last_finite_loss"])
    assert host_us < 40, host_us  # one copy launch, a few µs of Python (about 3 µs measured on a CPU)


def test_pageable_copies_are_timed(tmp_path):
    """The CNN fed from pageable memory: op-sampled steps time its batches' copies; the
    finding's evidence quotes them."""
    summary, facts = _run(tmp_path, "pageable_cnn")
    pinned, pinned_facts = _run(tmp_path, "pageable_cnn", PIN="1")
    FIGURES["copy_time"] = {"pageable": {k: facts.get(k) for k in ("copy_ms_per_step", "copy_gb_per_s",
                                                                    "copy_steps_timed", "pageable_mib_per_batch")},
                            "pinned": {k: pinned_facts.get(k) for k in ("copy_ms_per_step", "copy_gb_per_s",
                                                                        "copy_steps_timed")}}
    _save()
    assert facts["copy_ms_per_step"] > 0 and facts["copy_steps_timed"] >= 1
    assert 0.5 < facts["copy_gb_per_s"] < 100, facts["copy_gb_per_s"]
    finding = next(f for f in summary["findings"] if f["rule"] == "pageable-copies")
    evidence = " ".join(finding["evidence"].split())
    assert "GB/s" in evidence and "not the copies' time" not in evidence
    assert pinned_facts["copy_ms_per_step"] > 0 and 0.5 < pinned_facts["copy_gb_per_s"] < 100
