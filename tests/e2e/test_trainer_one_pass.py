"""The Trainer's one-pass loader text in the Trainer user's terms.

A Trainer run whose ``max_steps`` ends within the first epoch reads its training loader in
one pass: the stall fix leaves ``dataloader_persistent_workers`` out, and its words said
"`persistent_workers=True` would keep them" (a DataLoader argument the Trainer user never
writes: ``TrainingArguments(dataloader_persistent_workers=True)`` is theirs) and "(one
epoch)" of a run that stopped at 60 of 120 batches. hf_trainer.py: 30 updates of 2 batches.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_frameworks import RUNS, Run, has, run_script

from helpers import fix_code


@pytest.mark.slow
def test_a_trainer_stopped_by_max_steps_is_told_in_its_own_terms(tmp_path: Path) -> None:
    if not has(*RUNS["trainer"][2]):
        pytest.skip("needs transformers, accelerate (the frameworks extra)")
    script, env, _, _ = RUNS["trainer"]
    run: Run = run_script(tmp_path, "trainer", script, {**env, "TRAIN_SIZE": "960"})
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    (trained,) = [d for d in run.summary["dataloaders"] if d.get("hook") == "get_train_dataloader"]
    assert trained["iters"] == 1 and trained["fetches"] + trained["first_fetches"] < trained["len"], trained
    stall = next(f for f in run.summary["findings"] if f["rule"].startswith("dataloader-stall"))
    assert "persistent_workers" not in fix_code(stall), stall["fix"]
    words = " ".join(stall["fix"].split())
    assert "`TrainingArguments(dataloader_persistent_workers=True)` would keep them" in words, words
    assert "`persistent_workers=True` would" not in words, words
    assert "(one epoch)" not in words and "`max_steps`, or a fractional `num_train_epochs`, ended" in words, words
