"""Each loader's worker restarts in a run of several loaders (analyzers/loader_restarts.py):
from its own passes' first batches against its other fetches, for workers started with
spawn (a new Python importing torch and the script); the fix names each costly loader's line."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from mpsprofiler.diagnosis.analyzers.loader_restarts import several_loaders

SCRIPT = ("from torch.utils.data import DataLoader\n"
          "train_loader = DataLoader(train_set, batch_size=8, shuffle=True, num_workers=2)\n"
          "val_loader = DataLoader(val_set, batch_size=16, num_workers=2)\n")


def _loader(script: Path, line: int, first_s: float, **more: Any) -> dict[str, Any]:
    """4 passes: 4 first batches, 20 other fetches of 2 ms."""
    return {"file": str(script), "line": line, "created": line - 1, "num_workers": 2, "persistent_workers": False,
            "start_method_set": "spawn", "first_fetches": 4, "first_fetch_s": first_s, "fetches": 20, "fetch_s": 0.04,
            "iters": 4, **more}


def _facts(tmp: Path, *loaders: dict[str, Any], total_s: float = 20.0) -> dict[str, Any]:
    session = SimpleNamespace(dataloaders={i: d for i, d in enumerate(loaders, 1)}, run={"cwd": str(tmp)},
                              env={"platform": "linux", "python": "3.11"},
                              steps=SimpleNamespace(total_dur=total_s))
    return several_loaders(session, loaders[0])  # type: ignore[arg-type]


def test_both_loaders_spawned_restarts_are_measured_and_both_lines_fixed(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    facts = _facts(tmp_path, _loader(script, 2, 6.0), _loader(script, 3, 5.0))
    # (1.5 - 0.002) s x 3 restarts + (1.25 - 0.002) s x 3: the first pass starts its workers anyway
    assert abs(facts["respawn_cost_s"] - (3 * 1.498 + 3 * 1.248)) < 1e-3, facts
    assert facts["epochs_seen"] == 4 and facts["respawn_fix"] == "persistent_line", facts
    assert facts["respawn_place"] == "train.py:2 and train.py:3", facts
    assert facts["respawn_loaders"] == [1, 2], facts  # the loaders `mpsprof patch` edits
    assert facts["respawn_code"].count("persistent_workers=True") == 2, facts["respawn_code"]
    assert "shuffle=True" in facts["respawn_code"], facts["respawn_code"]


def test_a_loader_whose_restarts_cost_little_is_not_named(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    facts = _facts(tmp_path, _loader(script, 2, 6.0), _loader(script, 3, 0.01))
    assert facts["respawn_place"] == "train.py:2" and facts["respawn_loaders"] == [1], facts
    assert "val_loader" not in facts["respawn_code"], facts["respawn_code"]


def test_forked_or_persistent_workers_are_not_judged_here(tmp_path: Path) -> None:
    """A fork's first batch waits for the prefetch pipeline to fill, which persistent workers
    wait for too: not a restart's cost (its start-up CPU is measured apart)."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    assert _facts(tmp_path, _loader(script, 2, 6.0, start_method_set="fork"),
                  _loader(script, 3, 5.0, persistent_workers=True)) == {}


def test_a_pass_begun_after_the_last_step_is_no_restart_of_the_steps(tmp_path: Path) -> None:
    """A final evaluation: the validation loader's 4th pass began after the last step
    (``after_first_fetches``, probe/loader_sites.py). Its first batch started workers no
    step waited for: 2 restarts of the steps, not 3, and its 5 batches are not the steps'
    other fetches either. Before, it was charged as a third restart (1.498 s more)."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    train = _loader(script, 2, 6.0)
    val = _loader(script, 3, 6.0, after_first_fetches=1, after_first_fetch_s=1.5, after_fetches=5, after_fetch_s=0.01)
    facts = _facts(tmp_path, train, val)
    # train: 3 x (1.5 - 0.002); val: its 3 passes during the steps, 2 restarts x (1.5 - 0.002)
    assert abs(facts["respawn_cost_s"] - 5 * 1.498) < 1e-3, facts
    assert facts["epochs_seen"] == 4, facts  # the training loader's 4 passes


def test_a_loader_whose_second_pass_began_after_the_steps_has_no_restart(tmp_path: Path) -> None:
    """One validation pass during the training and one after it (``trainer.validate()``):
    the steps never waited for a restart of its workers, nothing to say."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    val = _loader(script, 3, 3.0, first_fetches=2, fetches=6, fetch_s=0.012,
                  after_first_fetches=1, after_first_fetch_s=1.5, after_fetches=3, after_fetch_s=0.006)
    assert _facts(tmp_path, _loader(script, 2, 0.008, start_method_set="fork"), val) == {}
