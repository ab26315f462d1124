"""The stall fix's DataLoader line for a loader read in one pass, and for workers where the
loader had none (analyzers/loader_place.py, loader_role.single_pass).

``persistent_workers=True`` keeps workers from one pass over a loader to the next: a run
that read its loader once (``iters``: 1 iterator, probe/loader_sites.py) and ended on its
own gets workers without it. Workers where there were none can change a seeded run from its
first batch (each worker seeds its own generators; a loader with workers draws its shuffle
order as its iterator starts): the fix says so then, not where the loader has workers."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mpsprofiler.diagnosis.analyzers.loader_place import place_facts
from mpsprofiler.experiment.candidates import candidate_for


def _facts(tmp: Path, iters: int | None, status: str = "finished", workers: int = 0, suggested: int = 2) -> dict[str, Any]:
    script = tmp / "train.py"
    script.write_text("from torch.utils.data import DataLoader\n"
                      f"loader = DataLoader(data, batch_size=8, num_workers={workers})\n")
    loader: dict[str, Any] = {"file": str(script), "line": 2, "created": 1, "num_workers": workers,
                              "persistent_workers": False}
    if iters is not None:
        loader["iters"] = iters
    session = SimpleNamespace(dataloaders={1: loader}, run={"cwd": str(tmp)}, model={"framework": None}, framework=None,
                              status=status)
    return place_facts(session, loader, suggested, workers, "8", None)  # type: ignore[arg-type]


def _stall(facts: dict[str, Any], workers: int, suggested: int) -> dict[str, Any]:
    return {"rule": "dataloader-stall", "facts": {**facts, "num_workers": workers, "suggested_num_workers": suggested}}


def test_a_loader_read_once_by_a_finished_run_gets_workers_without_persistent_workers(tmp_path: Path) -> None:
    facts = _facts(tmp_path, iters=1)
    assert facts["loader_keeps"] == "single" and facts["loader_change"] == "change", facts
    assert "num_workers=2" in facts["loader_code"] and "persistent_workers" not in facts["loader_code"], facts
    change = candidate_for(_stall(facts, 0, 2))
    assert change is not None and change.settings["dataloader"] == {"1": {"num_workers": 2}}, change


@pytest.mark.parametrize("iters, status", [(3, "finished"), (1, "cut"), (1, "crashed"), (None, "finished")])
def test_more_passes_a_cut_run_or_an_older_recording_keep_persistent_workers(tmp_path: Path, iters: int | None,
                                                                             status: str) -> None:
    """Three passes; one pass of a run `--max-steps` cut or that crashed (the training goes
    on past it); a recording without the count: the workers are kept, as before."""
    facts = _facts(tmp_path, iters=iters, status=status)
    assert facts["loader_keeps"] == "once", facts
    assert "persistent_workers=True" in facts["loader_code"], facts
    change = candidate_for(_stall(facts, 0, 2))
    assert change is not None and change.settings["dataloader"]["1"].get("persistent_workers") is True, change


def test_a_loader_read_once_with_its_workers_already_has_nothing_to_change(tmp_path: Path) -> None:
    """`mpsprof patch` said the finding "names no DataLoader argument to set" while the
    report showed a line that added persistent_workers=True only."""
    facts = _facts(tmp_path, iters=1, workers=2, suggested=2)
    assert facts["loader_change"] == "none", facts


def test_workers_where_there_were_none_are_said_to_change_a_seeded_run_from_its_first_batch(tmp_path: Path) -> None:
    assert _facts(tmp_path, iters=1)["loader_seeded"] == "first"
    assert _facts(tmp_path, iters=3, workers=2, suggested=4)["loader_seeded"] == "none"
