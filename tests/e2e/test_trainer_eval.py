"""A Hugging Face Trainer whose evaluation set is slow, evaluated every 10 steps.

Its stall is the evaluation loader's (the probe marks the loader ``get_eval_dataloader``
built): the finding says so, its figures are that loader's (batches of 32 used, not
trained on), and the fix is the script's ``TrainingArguments`` with
``dataloader_persistent_workers=True``, which makes the Trainer keep that loader across
``evaluate()`` calls; not "build it once, before the epoch loop" (the Trainer rebuilds it by
design), nor "the Trainer's training DataLoader". The real library, where installed (the
``frameworks`` extra); a tiny model from a config, no download.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from helpers import child_env, mpsprof_cli, read_summary

SCRIPTS = Path(__file__).parent.parent / "scripts_frameworks"
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false"}


@pytest.fixture(scope="module")
def eval_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if not all(importlib.util.find_spec(m) for m in ("transformers", "accelerate")):
        pytest.skip("needs transformers and accelerate (the frameworks extra)")
    tmp = tmp_path_factory.mktemp("trainer_eval")
    run_dir = tmp / "run"
    proc = mpsprof_cli("run", "--headless", "-o", str(run_dir), str(SCRIPTS / "hf_slow_eval.py"), cwd=tmp,
                       env=child_env(**{**OFFLINE, "OUT_DIR": str(tmp / "out")}), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "global_step 40" in proc.stdout
    summary = read_summary(run_dir)
    summary["_dir"] = run_dir
    return summary


def _stall(summary: dict[str, Any]) -> dict[str, Any]:
    found = {f["rule"]: f for f in summary["findings"]}
    stall = found.get("dataloader-stall-critical") or found.get("dataloader-stall")
    assert stall is not None, sorted(found)
    return stall


@pytest.mark.slow
def test_the_stall_names_the_trainers_evaluation_loader_and_its_training_arguments(eval_run: dict[str, Any]) -> None:
    stall = _stall(eval_run)
    evidence, fix = stall["evidence"], stall["fix"]
    assert "the Trainer's evaluation DataLoader (started at " in evidence and "hf_slow_eval.py:" in evidence, evidence
    assert "training DataLoader" not in evidence and "one batch of 32 samples" in evidence, evidence
    # its batches are used by evaluation, not trained on
    assert "read in a few steps only" in fix and "It trains in" not in fix, fix
    code = fix.split("```python\n", 1)[1].split("```", 1)[0]
    assert code.startswith("args = TrainingArguments(") and "eval_strategy=\"steps\"" in code, code
    assert "dataloader_num_workers=" in code and "dataloader_persistent_workers=True" in code, code
    # rebuilt by the Trainer at each evaluate(), kept with persistent workers: no epoch loop to leave
    assert "at each `evaluate()` (4 times here)" in fix and "`Trainer.get_eval_dataloader`" in fix, fix
    assert "every epoch" not in fix and "Built once" not in fix and "epoch loop" not in fix, fix
    loaders = eval_run["dataloaders"]
    assert [d.get("role") for d in loaders] == [None, "eval"], loaders
    assert loaders[1]["batch_size"] == 32 and loaders[1]["rebuilt"] == 4


@pytest.mark.slow
def test_try_titles_the_evaluation_loader_and_times_its_passes(eval_run: dict[str, Any]) -> None:
    """`try` changes the evaluation loader's constructions only, titled as the user knows it,
    over a window that spans its passes (the training steps alone hold no evaluation)."""
    from mpsprofiler.diagnosis.facts import collect_facts
    from mpsprofiler.experiment.candidates import candidate_for
    from mpsprofiler.session.recording import load_runs

    facts = collect_facts(load_runs([eval_run["_dir"]]).session)
    c = candidate_for(_stall(eval_run), facts)
    assert c is not None and sorted(c.settings["dataloader"], key=int) == ["4", "6", "8", "10"], c.settings
    assert c.text.endswith("(the Trainer's evaluation DataLoader)"), c.text
    assert c.window is not None and c.window.steps >= 20, c.window


@pytest.mark.slow
def test_the_title_says_evaluation_waits_and_patch_writes_the_training_arguments(
        eval_run: dict[str, Any], tmp_path: Path) -> None:
    """The stall is evaluation's time between steps, not a training step starved; `patch`
    writes both settings into the script's TrainingArguments (the Trainer's loaders all
    start at its train() line, which names no loader to change)."""
    assert _stall(eval_run)["title"].startswith("Evaluation waits for"), _stall(eval_run)["title"]
    proc = mpsprof_cli("patch", str(eval_run["_dir"]), "--rule", _stall(eval_run)["rule"], env=child_env())
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    added = [line for line in proc.stdout.splitlines() if line.startswith("+ ") or line.startswith("+    ")]
    assert any("dataloader_num_workers=" in line for line in added), proc.stdout
    assert any("dataloader_persistent_workers=True" in line for line in added), proc.stdout
    assert "by hand" not in proc.stdout.split("diff --git", 1)[0], proc.stdout
