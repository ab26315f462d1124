"""Loaders a framework builds for evaluation, and loaders numbered as the user counts them.

The probe marks a loader built under a framework's evaluation hook (the Trainer's
``get_eval_dataloader``, Lightning's ``val_dataloader``) with its role, from the frames that
built it; a plain script's own ``val_dataloader()`` helper is not marked. A framework's copy
of the script's loader (accelerate's ``prepare``) has a construction number of its own,
which ``--set dataloader.N`` addresses, but user-facing text counts the script's loaders:
the script's only loader is "DataLoader 1", not "DataLoader 2".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from torch.utils.data import DataLoader

from mpsprofiler import events
from mpsprofiler.diagnosis.analyzers.loader_place import user_label, user_ordinals
from mpsprofiler.diagnosis.facts import collect_facts
from mpsprofiler.experiment.candidates import candidate_for
from mpsprofiler.probe import loader_sites
from mpsprofiler.session.loaders import merge_rebuilt
from mpsprofiler.settings import label
from tests.unit.test_analyzers import LINUX_ENV, build_session, loader, step_rows


class Trainer:
    """Named as transformers' is: its ``get_eval_dataloader`` builds an evaluation loader."""

    def get_eval_dataloader(self) -> DataLoader[Any]:
        return DataLoader(range(8), batch_size=2)

    def get_train_dataloader(self) -> DataLoader[Any]:
        return DataLoader(range(8), batch_size=2)


class Script:
    """A plain script's helper of the same name as Lightning's hook: no role."""

    def val_dataloader(self) -> DataLoader[Any]:
        return DataLoader(range(8), batch_size=2)


def _built(make: Any) -> dict[str, Any]:
    sites = loader_sites.LoaderSites(lambda **fields: None)
    uninstall = loader_sites.install_construction_hook(sites, lambda exc: None)
    try:
        built = make()
    finally:
        uninstall()
    return sites.site_fields(built)


def test_the_trainers_eval_loader_is_marked_and_the_others_are_not() -> None:
    class MyTrainer(Trainer):  # a subclass's override counts too
        pass

    assert _built(MyTrainer().get_eval_dataloader)["role"] == "eval"
    assert "role" not in _built(MyTrainer().get_train_dataloader)
    assert "role" not in _built(Script().val_dataloader)
    assert "role" not in _built(lambda: DataLoader(range(8)))


class LightningModule:
    """Named as Lightning's: its hooks build the loaders (validation's first, at the sanity check)."""

    def train_dataloader(self) -> DataLoader[Any]:
        return DataLoader(range(8), batch_size=2)

    def val_dataloader(self) -> DataLoader[Any]:
        return DataLoader(range(8), batch_size=2)


def test_the_hook_that_built_a_loader_is_recorded() -> None:
    class Model(LightningModule):
        pass

    train = _built(Model().train_dataloader)
    assert train["hook"] == "train_dataloader" and "role" not in train  # training: no evaluation role
    assert _built(Model().val_dataloader) == {**_built(Model().val_dataloader), "hook": "val_dataloader",
                                              "role": "eval"}
    assert _built(Trainer().get_train_dataloader)["hook"] == "get_train_dataloader"
    assert "hook" not in _built(Script().val_dataloader) and "hook" not in _built(lambda: DataLoader(range(8)))


def test_a_lightning_training_loader_is_named_by_its_hook_not_its_build_order() -> None:
    """Lightning builds the validation loader first (sanity check): by construction order the
    training loader was "DataLoader 2", in ``try``'s titles and ``patch``'s notes."""
    val = {**_rec(1, role="eval", hook="val_dataloader"), "line": 40}
    train = {**_rec(2, hook="train_dataloader"), "line": 36}
    session = build_session(env=LINUX_ENV, loaders=[val, train], rows=step_rows([0.02] * 10))
    assert user_label(session, train) == "the DataLoader of train_dataloader()"
    assert user_label(session, val) == "the DataLoader of val_dataloader()"
    assert user_label(session, {**_rec(3), "line": 50}) == "DataLoader 3"  # the script's own: numbered
    assert label({"dataloader": {"2": {"num_workers": 4}}}, user_label(session, train)) == (
        "num_workers=4 (the DataLoader of train_dataloader())")


def _rec(created: int, **over: Any) -> dict[str, Any]:
    return loader(id=created, created=created, file="/w/train.py", line=29, call_file="/w/train.py", call_line=33,
                  **over)


def test_a_trainers_two_loaders_under_one_line_are_two_and_numbered_apart() -> None:
    """Training and evaluation loaders of one Trainer, over the same dataset and batch size,
    both "built" at `trainer.train()`: two loaders, DataLoader 1 and 2, not one rebuilt."""
    records = {1: _rec(2, created_by_then=2), 2: _rec(4, role="eval", created_by_then=4),
               3: _rec(6, role="eval", created_by_then=6)}
    merged = merge_rebuilt(records)  # type: ignore[arg-type]
    assert sorted(merged) == [1, 2] and merged[2]["created_all"] == [4, 6] and "rebuilt" not in merged[1]
    session = build_session(env=LINUX_ENV, loaders=merged.values(), rows=step_rows([0.02] * 10))
    assert user_ordinals(session) == {2: 1, 4: 2}


def test_a_frameworks_copy_is_not_another_dataloader_in_texts() -> None:
    """accelerate's `prepare` copy of the script's only loader is construction 2 (the one
    iterated, the one recorded): try's title and the pageable-copies finding say DataLoader 1,
    while `--set` still addresses construction 2."""
    session = build_session(env=LINUX_ENV, device="cuda", loaders=[_rec(2)], rows=step_rows([0.02] * 40))
    assert user_label(session, session.dataloaders[2]) == "DataLoader 1"
    session.feed(events.decode(events.encode(events.KIND_HEALTH, 2.0, what="copies", loader=2, batches=16,
                                             pageable_batches=16, bytes_per_batch=12 * 1024**2,
                                             pinned_bytes_per_batch=0, pin_memory=False)))
    facts = collect_facts(session)
    assert facts["pageable_loader"] == 2 and facts["pageable_loader_name"] == "DataLoader 1"
    stall = {"rule": "dataloader-stall", "facts": {"suggested_num_workers": 4, "num_workers": 0,
                                                   "loader_created": 2, "loader_label": "DataLoader 1"}}
    c = candidate_for(stall)
    assert c is not None and c.settings["dataloader"] == {"2": {"num_workers": 4, "persistent_workers": True}}
    assert c.text == "num_workers=4, persistent_workers=true (DataLoader 1)"
    rebuilt = {"rule": "dataloader-stall", "facts": {"suggested_num_workers": 2, "num_workers": 0,
                                                     "loader_created_all": [4, 6, 8],
                                                     "loader_label": "the Trainer's evaluation DataLoader"}}
    c = candidate_for(rebuilt)
    assert c is not None and sorted(c.settings["dataloader"]) == ["4", "6", "8"]
    assert c.text == "num_workers=2 (the Trainer's evaluation DataLoader)"
    # without a name (a recording from before): the construction numbers, in their order
    assert label({"dataloader": {str(n): {"num_workers": 2} for n in (10, 4, 6, 8)}}) == (
        "num_workers=2 (DataLoaders 4, 6, 8, 10)")


def test_try_titles_the_loader_as_the_finding_names_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Issue 28: `mpsprof try RUN` on a Trainer's stall titled its runs "(DataLoader 2)"
    (the construction number, accelerate's copy counted) where the finding and the report
    say the Trainer's training DataLoader, DataLoader 1: the plan carries the candidate's
    loader name to the trial's title; `--set` still addresses construction 2."""
    import argparse
    from types import SimpleNamespace

    import mpsprofiler.diagnosis as diagnosis
    import mpsprofiler.session.recording as recording
    from mpsprofiler.experiment import command
    from mpsprofiler.experiment.trial import Target, Trial, TrialConfig

    stall = {"rule": "dataloader-stall", "title": "stall", "facts": {
        "suggested_num_workers": 4, "num_workers": 0, "loader_created": 2,
        "loader_label": "the Trainer's training DataLoader"}}
    monkeypatch.setattr(recording, "load_runs", lambda dirs: SimpleNamespace(session=None))
    monkeypatch.setattr(diagnosis, "diagnose", lambda session: SimpleNamespace(findings=[stall], facts={}))
    monkeypatch.setattr(command, "target_from_session", lambda session, cwd=None: Target("train.py"))
    args = argparse.Namespace(output=tmp_path / "out", cwd=None)
    plans, _ = command._run_dir_plans(tmp_path, {}, args)
    (target, change, rule, _, _, loader), = plans
    assert change["dataloader"] == {"2": {"num_workers": 4, "persistent_workers": True}}
    trial = Trial(target, change, tmp_path / "t", TrialConfig(pairs=2, steps=10), rule=rule, loader=loader)
    assert trial.label == "num_workers=4, persistent_workers=true (the Trainer's training DataLoader)"


def test_fetches_after_the_last_step_are_no_steps_wait() -> None:
    """Issue 28: Lightning's trainer.validate()/trainer.test() after fit read their loaders
    after the last step ended; the probe says how many of a loader's fetches (and seconds)
    came then, and the steps' shares of the loaders' wait and batches leave them out (they
    made the fix's "trains in" 45.1 ms where the evidence said "computed for 34.0 ms")."""
    import time
    from types import SimpleNamespace

    from mpsprofiler.diagnosis.analyzers.loader_place import in_steps, shares

    sent: list[dict[str, Any]] = []
    step = [0]
    sites = loader_sites.LoaderSites(lambda d: sent.append(dict(d)), lambda: step[0])
    uninstall = loader_sites.install_construction_hook(sites, lambda exc: None)
    try:
        train, val, test = DataLoader(range(32)), DataLoader(range(8)), DataLoader(range(8))
    finally:
        uninstall()

    def read(dl: Any, number: int, batches: int, seconds: float, steps: bool) -> None:
        it = iter(dl)
        sites.on_iter(it, dl, {"id": number})
        for _ in range(batches):
            sites.on_fetch(it, seconds, next(it), time.perf_counter())
            step[0] += steps

    read(train, 1, 10, 0.03, True)
    read(val, 2, 5, 0.01, False)  # an evaluation pass between two steps
    read(train, 1, 3, 0.03, True)
    read(test, 3, 5, 0.2, False)  # trainer.test() after the last step
    sites.flush()
    last = {d["id"]: d for d in sent}
    assert last[3]["fetches"] == last[3]["after_fetches"] == 4  # (each iterator's first is not timed)
    assert "after_fetches" not in last[1] and "after_fetches" not in last[2]
    session = SimpleNamespace(dataloaders={n: {**d, "created": n} for n, d in last.items()})
    assert in_steps(session.dataloaders[3]) == (0.0, 0.0)
    wait_share, batch_share = shares(session, session.dataloaders[1])  # type: ignore[arg-type,misc]
    assert batch_share == 11 / 15 and abs(wait_share - 0.33 / 0.37) < 1e-6


def test_a_steps_wait_for_another_loader_is_neither_this_loaders_nor_compute() -> None:
    """A step that ran an evaluation pass (9 batches: 1 of this loader, 8 of the other's at
    10 ms) waited 110 ms: 30 of them this loader's; its compute is the step less all its
    waiting, in ordinary steps as in that one."""
    from types import SimpleNamespace

    from mpsprofiler.diagnosis.analyzers.loader_advice import step_loads

    plain = SimpleNamespace(dur=0.070, wait=0.030, batches=1)
    evaluated = SimpleNamespace(dur=0.300, wait=0.110, batches=9)
    loads = step_loads([plain, evaluated], 0, 0.5, (1.0, 0.010))
    assert [(round(a, 3), round(b, 3)) for a, b in loads] == [(0.03, 0.04), (0.03, 0.19)]
    # without the per-batch figures: the share of every step's wait, compute still without any wait
    assert [round(b, 3) for _, b in step_loads([plain], 0, 0.5)] == [0.04]


def test_a_stall_says_how_much_of_the_steps_wait_was_its_loaders() -> None:
    """Issue 28: 60 steps of 1 training batch (30 ms wait, 20 ms compute); every 20th step
    also runs a validation pass of 8 batches at 50 ms each; validate()/test() after fit
    read 16 more validation batches at 100 ms no step waited for (counted in, they made the
    validation loader the one the steps waited on most). The evidence's wait per step is the
    steps' (all loaders'), and says how much of it was the training loader's; the fix's
    compute per batch is the evidence's (neither the passes after fit nor the validation
    waits inside the steps are training)."""
    durs, waits, batches = [], [], []
    for i in range(60):
        evaluated = i % 20 == 10
        waits.append(0.030 + (0.4 if evaluated else 0.0))
        durs.append(waits[-1] + 0.020)
        batches.append(9 if evaluated else 1)
    train = loader(id=2, created=2, file="/w/train.py", line=30, fetches=60, fetch_s=1.8)
    val = loader(id=1, created=1, file="/w/train.py", line=32, fetches=24 + 16, fetch_s=1.2 + 1.6, after_fetches=16,
                 after_fetch_s=1.6, role="eval", len=8)
    session = build_session(env=LINUX_ENV, loaders=[val, train], rows=step_rows(durs, waits, batches))
    facts = collect_facts(session)
    assert facts["stall_wait"] == "training_shared", facts.get("stall_wait")
    assert abs(facts["data_wait_own_ms"] - 30.0) < 3.0 and facts["data_wait_ms"] > 45.0
    assert abs(facts["compute_ms"] - 20.0) < 1.0 and abs(facts["reason_train_ms"] - 20.0) < 2.0, (
        facts["compute_ms"], facts["reason_train_ms"])


def test_try_names_its_folder_as_it_titles_the_change(tmp_path: Path) -> None:
    """A Trainer's experiment folder read "1-2.num_workers_4" (the construction number)
    where ``try`` titled it "num_workers=4 (the Trainer's training DataLoader)"."""
    from mpsprofiler.experiment.store import experiment_dir, folder_label

    settings = {"dataloader": {"2": {"num_workers": 4, "persistent_workers": True}}}
    name = folder_label(settings, "the Trainer's training DataLoader")
    assert name == "num_workers_4_persistent_workers_true_the_Trainer_s_training_DataLoader"
    assert experiment_dir(tmp_path, name).name == f"1-{name}"
    assert folder_label({"dataloader": {"*": {"num_workers": 4}}}) == "num_workers_4"
    assert folder_label({"env": {"OMP_NUM_THREADS": "1"}}) == "env.OMP_NUM_THREADS_1"
    # the TUI's try names it from the same title
    assert experiment_dir(tmp_path, label(settings, "the Trainer's training DataLoader").replace(", ", "_")).name == (
        f"1-{name}")
