"""Constructions of one DataLoader at one place merge into one record (session/loaders.py)."""

from __future__ import annotations

from typing import Any

from mpsprofiler.session.loaders import merge_rebuilt


def _rec(created: int, line: int | None, fetches: int, fetch_s: float, **extra: Any) -> dict[str, Any]:
    return {"id": created, "created": created, "file": "/w/train.py" if line else None, "line": line,
            "dataset": "Slow", "batch_size": 16, "fetches": fetches, "fetch_s": fetch_s, **extra}


def test_a_loader_built_every_epoch_is_one_record_and_others_stay_apart() -> None:
    records = {1: _rec(1, 17, 9, 0.3), 2: _rec(2, 30, 3, 0.1, dataset="Val"), 3: _rec(3, 17, 9, 0.4),
               4: _rec(4, 30, 3, 0.1, dataset="Val"), 5: _rec(5, None, 2, 0.05), 6: _rec(6, None, 2, 0.05)}
    merged = merge_rebuilt(records)  # type: ignore[arg-type]
    assert sorted(merged) == [1, 2, 5, 6]  # training (17) and validation (30) loaders; unknown lines kept apart
    train = merged[1]
    assert train["rebuilt"] == 2 and train["created_all"] == [1, 3]
    assert train["fetches"] == 18 and abs(train["fetch_s"] - 0.7) < 1e-9 and train["batch_size"] == 16
    assert merged[2]["created_all"] == [2, 4]
    assert "rebuilt" not in merged[5] and merged[5] is records[5]


def test_a_helper_called_from_two_places_builds_two_loaders() -> None:
    """One line in `make_loader()`, called for the training and the evaluation set: two loaders."""
    a = _rec(1, 3, 10, 0.2, call_file="/w/train.py", call_line=20)
    b = _rec(2, 3, 4, 0.1, call_file="/w/train.py", call_line=21)
    again = _rec(3, 3, 10, 0.2, call_file="/w/train.py", call_line=20)
    merged = merge_rebuilt({1: a, 2: b, 3: again})  # type: ignore[arg-type]
    assert sorted(merged) == [1, 2] and merged[1]["rebuilt"] == 2 and "rebuilt" not in merged[2]


def test_loaders_of_different_lengths_built_at_one_line_stay_two() -> None:
    """`{split: make_loader(split) for split in ("train", "val")}`: one line, one call site,
    the training and the validation loader."""
    train = _rec(1, 3, 100, 1.0, len=160, call_file="/w/train.py", call_line=20)
    val = _rec(2, 3, 8, 0.3, len=4, call_file="/w/train.py", call_line=20)
    merged = merge_rebuilt({1: train, 2: val})  # type: ignore[arg-type]
    assert sorted(merged) == [1, 2] and not any("rebuilt" in d for d in merged.values())


def test_two_loaders_built_together_at_one_line_stay_two_and_a_rebuild_after_use_merges() -> None:
    """A LightningDataModule's `return [DataLoader(val_id, 128), DataLoader(val_ood, 128)]`:
    same line, dataset kind, length and batch size, both built before either was iterated
    (the first was iterated with 3 loaders built): two loaders, not "TensorDataset (built 2x)".
    The same line building its loader again after the last one was iterated (every epoch)
    is one loader, and so is a recording without the counts (sent from this version on)."""
    together = {2: _rec(2, 19, 7, 0.1, len=7, created_by_then=3), 3: _rec(3, 19, 7, 0.1, len=7, created_by_then=3)}
    assert sorted(merge_rebuilt(together)) == [2, 3]  # type: ignore[arg-type]
    epochs = {k: _rec(k, 19, 7, 0.1, len=7, created_by_then=k) for k in (1, 2, 3)}
    (merged,) = merge_rebuilt(epochs).values()  # type: ignore[arg-type]
    assert merged["rebuilt"] == 3 and merged["created_all"] == [1, 2, 3]
    old = {k: _rec(k, 19, 7, 0.1, len=7) for k in (1, 2)}
    assert len(merge_rebuilt(old)) == 1  # type: ignore[arg-type]
