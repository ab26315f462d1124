"""What the one pass over a loader read once was (loader_role.one_pass_kind), as the stall
fix words it (rules/dataloader-stall.yaml ``loader_one_pass``, ``loader_keep_setting``):
"(one epoch)" only where the pass read every batch of the loader's ``len``."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mpsprofiler.diagnosis.analyzers.loader_place import place_facts
from mpsprofiler.diagnosis.engine import phrase_for
from mpsprofiler.diagnosis.rules import builtin_rules_dir, load_rules


def _facts(tmp: Path, **loader_fields: Any) -> dict[str, Any]:
    script = tmp / "train.py"
    script.write_text("from torch.utils.data import DataLoader\nloader = DataLoader(data, batch_size=8)\n")
    loader: dict[str, Any] = {"file": str(script), "line": 2, "created": 1, "num_workers": 0,
                              "persistent_workers": False, "iters": 1, **loader_fields}
    session = SimpleNamespace(dataloaders={1: loader}, run={"cwd": str(tmp)}, model={"framework": None},
                              framework=None, status="finished")
    return place_facts(session, loader, 2, 0, "8", None)  # type: ignore[arg-type]


def _words(facts: dict[str, Any]) -> str:
    phrases = next(iter(load_rules([builtin_rules_dir() / "dataloader-stall.yaml"]))).phrases
    return str(phrase_for(phrases, facts, "loader_keeps", ()))


@pytest.mark.parametrize("given, kind, said", [
    ((99, 1), "epoch", "in one pass (one epoch), so"),
    ((19, 1), "steps", "in one pass (part of one epoch: the loop stopped before the loader's last batch), so"),
])
def test_one_epoch_only_where_the_pass_read_the_whole_loader(tmp_path: Path, given: tuple[int, int], kind: str,
                                                             said: str) -> None:
    facts = _facts(tmp_path, len=100, fetches=given[0], first_fetches=given[1])
    assert facts["loader_keeps"] == "single" and facts["loader_one_pass"] == kind, facts
    words = _words(facts)
    assert said in words and "`persistent_workers=True` would keep them" in words, words


def test_a_stream_without_a_length_says_one_pass_alone(tmp_path: Path) -> None:
    facts = _facts(tmp_path, fetches=40, first_fetches=1)  # an IterableDataset: no len
    words = _words(facts)
    assert facts["loader_one_pass"] == "unknown" and "in one pass, so its workers start once" in words, words
