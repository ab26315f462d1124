"""`mpsprof patch` for a Hugging Face Trainer's script, whose fixes are settings of its
TrainingArguments call (or a TRL config): the Trainer's own loss reads get
``logging_nan_inf_filter=False`` (the fix the finding shows, ``diagnosis/analyzers/sync_fix.py``),
its loader's stall the ``dataloader_*`` fields; reads the script makes itself are the
author's to move, and said so."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from mpsprofiler.diagnosis.findings import Finding
from mpsprofiler.patch.plan import plan
from mpsprofiler.session.session import Session

SCRIPT = '''from transformers import Trainer, TrainingArguments


def main():
    args = TrainingArguments(
        output_dir="out",  # where checkpoints go
        gradient_accumulation_steps=2,
    )
    Trainer(model=None, args=args).train()


main()
'''


def _session(script: Path) -> Any:
    session = Session()
    session.run.update({"target": str(script), "cwd": str(script.parent), "started": time.time() + 3600})
    return session


def _finding(rule: str, **facts: Any) -> Finding:
    return Finding(rule=rule, severity="info", title=rule, evidence="e", fix="f", facts=dict(facts))


def test_the_trainers_filter_is_switched_off_in_the_scripts_training_arguments(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    facts = {"sync_fix_where": "trainer_filter_line", "sync_fix_file": str(script), "sync_fix_line": 5,
             "sync_fix_place": "train.py:5", "sync_top_line": "train.py:9"}
    for rule in ("sync-heavy-mac", "sync-heavy"):
        fix = plan(_session(script), [_finding(rule, **facts)], {})[0]
        assert not fix.not_patched, fix.not_patched
        before, after = fix.files[str(script.resolve())]
        assert before == SCRIPT
        assert after == SCRIPT.replace("        gradient_accumulation_steps=2,\n",
                                       "        gradient_accumulation_steps=2,\n        logging_nan_inf_filter=False,\n")
        compile(after, "train.py", "exec")


def test_the_scripts_own_reads_are_not_patched_and_said_so(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("import torch\n")
    fix = plan(_session(script), [_finding("sync-heavy-mac", sync_fix_where="plain", sync_top_line="train.py:7")],
               {})[0]
    assert not fix.files
    assert fix.not_patched == ["not patched: sync-heavy-mac: read the values synced at train.py:7 once every N "
                               "steps, by hand (moving a read changes what the loop logs and when, which is the "
                               "author's choice)"]


def test_a_trl_config_is_the_scripts_training_arguments(tmp_path: Path) -> None:
    """TRL's SFTTrainer (a Trainer) takes an SFTConfig, a subclass of TrainingArguments: the
    call the fix rewrites, where a model's config call (BertConfig) is not one."""
    from mpsprofiler.diagnosis.analyzers.framework_place import arguments_line

    script = tmp_path / "sft.py"
    script.write_text("from transformers import BertConfig\nfrom trl import SFTConfig, SFTTrainer\n\n"
                      "config = BertConfig(hidden_size=64)\n"
                      "args = SFTConfig(output_dir='out', gradient_accumulation_steps=4)\n"
                      "SFTTrainer(model=None, args=args).train()\n")
    assert arguments_line(str(script), 6) == ("SFTConfig", 5)
    facts = {"sync_fix_where": "trainer_filter_line", "sync_fix_file": str(script), "sync_fix_line": 5}
    fix = plan(_session(script), [_finding("sync-heavy-mac", **facts)], {})[0]
    after = fix.files[str(script.resolve())][1]
    assert "args = SFTConfig(output_dir='out', gradient_accumulation_steps=4, logging_nan_inf_filter=False)" in after
    assert "BertConfig(hidden_size=64)\n" in after


TRAINER_SCRIPT = '''from transformers import Trainer, TrainingArguments

if __name__ == "__main__":
    args = TrainingArguments(
        output_dir="out",
        dataloader_num_workers=0,
    )
    trainer = Trainer(model=None, args=args)
    trainer.train()
'''


def test_a_trainers_stall_patch_sets_its_training_arguments(tmp_path: Path) -> None:
    """The probe records a Trainer's loader at the script's `trainer.train()` line, where no
    DataLoader(...) is written: the patch sets the workers on the script's TrainingArguments,
    under their dataloader_* names (was: "no DataLoader(...) call at line 9", by hand)."""
    script = tmp_path / "train.py"
    script.write_text(TRAINER_SCRIPT)
    session = _session(script)
    session.model["framework"] = "transformers Trainer"
    session.dataloaders = {1: {"created": 1, "file": str(script), "line": 9, "num_workers": 0}}
    finding = _finding("dataloader-stall", suggested_num_workers=2, loader_created=1)
    fix = plan(session, [finding], {})[0]
    assert not fix.not_patched, fix.not_patched
    after = fix.files[str(script.resolve())][1]
    assert "        dataloader_num_workers=2,\n        dataloader_persistent_workers=True,\n    )" in after
    assert "DataLoader(" not in after and "num_workers=2, persistent" not in after
    compile(after, "train.py", "exec")
    # a script whose TrainingArguments are built elsewhere (a config module): said, not guessed
    script.write_text("from config import args\nfrom transformers import Trainer\n\n\n\n\n\n"
                      "trainer = Trainer(model=None, args=args)\ntrainer.train()\n")
    fix = plan(session, [finding], {})[0]
    assert not fix.files
    assert "builds its loader from its TrainingArguments, not found in that file" in fix.not_patched[0]
    assert "dataloader_num_workers=2" in fix.not_patched[0]


def test_a_planners_whole_line_is_printed_once_not_nested(tmp_path: Path) -> None:
    """`mpsprof patch` printed "not patched: sync-heavy-mac: edit by hand as the finding's
    fix says (not patched: sync-heavy-mac: read the values ... (...))": the planner's own
    whole line (the rule's "not patched" sentence), wrapped in the generic one again."""
    from mpsprofiler.patch.unplanned import planner_line

    script = tmp_path / "train.py"
    script.write_text("import torch\n")
    fix = plan(_session(script), [_finding("sync-heavy-mac", sync_fix_where="plain", sync_top_line="train.py:7")],
               {})[0]
    line = planner_line(fix.rule, fix.not_patched)
    assert line == fix.not_patched[0], line
    assert line.count("not patched") == 1 and line.count("sync-heavy-mac") == 1, line
    # a planner's own reason (not a whole line) is still given the rule's form
    anomaly = plan(_session(script), [_finding("sync-heavy-mac", sync_fix_where="anomaly")], {})[0]
    said = planner_line(anomaly.rule, anomaly.not_patched)
    assert said.startswith("not patched: sync-heavy-mac: edit by hand") and said.count("not patched") == 1, said
