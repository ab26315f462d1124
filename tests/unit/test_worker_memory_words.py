"""The memory per worker that the loader fix states: measured where the run had workers,
an upper bound where they were forked (their resident memory counts the training process's
pages they share copy-on-write), and no figure "here" where the run had none (it was a
default said as if measured: "about 300 MiB here" for a loader with num_workers=0)."""

from __future__ import annotations

from pathlib import Path

import yaml

from mpsprofiler.diagnosis.analyzers.loader_advice import _memory_basis

RULE = Path(__file__).resolve().parents[2] / "rules" / "dataloader-stall.yaml"


def test_the_basis_follows_whether_workers_ran_and_how_they_started() -> None:
    assert _memory_basis(None, None) == "estimate"
    assert _memory_basis(0, "fork") == "estimate"
    assert _memory_basis(200 * 2**20, "fork") == "measured_fork"
    assert _memory_basis(200 * 2**20, "spawn") == "measured"
    assert _memory_basis(200 * 2**20, None) == "measured"


def test_every_basis_has_its_words_and_only_a_measured_one_gives_a_figure() -> None:
    variants = yaml.safe_load(RULE.read_text(encoding="utf-8"))["phrases"]["worker_memory_basis"]
    assert set(variants) == {"estimate", "measured", "measured_fork"}
    assert "{worker_memory_mib}" not in variants["estimate"] and "here" not in variants["estimate"]
    assert all("{worker_memory_mib}" in variants[k] for k in ("measured", "measured_fork"))
