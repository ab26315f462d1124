"""Two fixes that edit one call of the script show that call with both changes.

A Hugging Face Trainer whose collator sleeps (a loader stall: ``dataloader_num_workers``)
and whose loss filter reads the loss every micro-batch (``logging_nan_inf_filter=False``):
both fixes rewrite the script's one ``TrainingArguments(...)``. Until session 56 each
printed the whole call without the other's change, so the call copied in last undid the
other fix. ``mpsprof patch`` makes both, one on top of the other, and they apply in turn.
"""

from __future__ import annotations

import ast
import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers import child_env, fix_code, mpsprof_cli, read_summary
from mpsprofiler.diagnosis.analyzers.framework_place import arguments_fix
from mpsprofiler.diagnosis.findings import Finding
from mpsprofiler.diagnosis.shared_calls import carry_shared_calls

FRAMEWORKS = Path(__file__).resolve().parent.parent / "scripts_frameworks"
SCRIPT = '''from transformers import Trainer, TrainingArguments

args = TrainingArguments(output_dir="out", max_steps=10, dataloader_num_workers=0)
trainer = Trainer(model=None, args=args)
trainer.train()
'''


def _keywords(code: str) -> dict[str, str]:
    call = next(n for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Call))
    return {k.arg: ast.unparse(k.value) for k in call.keywords if k.arg}


def test_fixes_of_one_call_each_show_it_with_both_changes(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    loader = arguments_fix(str(script), 5, {"dataloader_num_workers": "4"}, tmp_path)
    sync = arguments_fix(str(script), 5, {"logging_nan_inf_filter": "False"}, tmp_path)
    assert loader.edit is not None and sync.edit is not None
    findings = [Finding("dataloader-stall", "warning", "t", "e", f"Change them to:\n```python\n{loader.code}\n```"),
                Finding("sync-heavy-mac", "info", "t", "e", f"Turn it off:\n```python\n{sync.code}\n```\n\n"),
                Finding("other", "info", "t", "e", "no code")]
    facts = {"loader_code_edit": loader.edit, "sync_fix_code_edit": sync.edit}
    carry_shared_calls(findings, facts)
    for f in findings[:2]:
        assert _keywords(fix_code(f.to_dict())) == {"output_dir": "'out'", "max_steps": "10",
                                                     "dataloader_num_workers": "4",
                                                     "logging_nan_inf_filter": "False"}, f.fix
    assert "carries the change of the fix for sync-heavy-mac too (`logging_nan_inf_filter=False`)" in findings[0].fix
    assert "carries the change of the fix for dataloader-stall too (`dataloader_num_workers=4`)" in findings[1].fix
    assert findings[2].fix == "no code"
    # two fixes that want different values for one argument stay apart
    other = arguments_fix(str(script), 5, {"dataloader_num_workers": "2"}, tmp_path)
    apart = [Finding("a", "info", "t", "e", loader.code), Finding("b", "info", "t", "e", other.code)]
    assert other.edit is not None
    carry_shared_calls(apart, {"loader_code_edit": loader.edit, "x_edit": other.edit})
    assert [f.fix for f in apart] == [loader.code, other.code]


@pytest.mark.slow
@pytest.mark.skipif(not all(importlib.util.find_spec(m) for m in ("transformers", "accelerate")),
                    reason="needs the frameworks extra")
def test_a_trainers_loader_and_sync_fixes_show_one_call_and_patch_in_turn(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(FRAMEWORKS / "hf_trainer.py", src / "hf_trainer.py")
    env = child_env(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1",
                    TOKENIZERS_PARALLELISM="false", STEPS="30", ACCUM="2", COLLATE_SLEEP="0.03",
                    OUT_DIR=str(tmp_path / "out"))
    run = tmp_path / "run"
    proc = mpsprof_cli("run", "--headless", "-o", str(run), "hf_trainer.py", cwd=src, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    findings = {f["rule"]: f for f in read_summary(run)["findings"]}
    stall = next(r for r in findings if r.startswith("dataloader-stall"))
    codes = [fix_code(findings[r]) for r in (stall, "sync-heavy-mac")]
    assert codes[0] == codes[1], codes
    shown = _keywords(codes[0])
    assert shown["logging_nan_inf_filter"] == "False" and int(shown["dataloader_num_workers"]) > 0, shown
    assert shown["gradient_accumulation_steps"] == "ACCUM"  # the script's own arguments, as written

    patched = mpsprof_cli("patch", str(run), cwd=src, env=env)
    assert patched.returncode == 0, patched.stderr[-3000:]
    repo = tmp_path / "repo"
    shutil.copytree(src, repo)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    for rule in (stall, "sync-heavy-mac"):  # the second is made on top of the first, as it says
        applied = subprocess.run(["git", "apply", str(run / f"fix-{rule}.patch")], cwd=repo, capture_output=True,
                                 text=True)
        assert applied.returncode == 0, applied.stderr
    made = _keywords(next(ast.get_source_segment((repo / "hf_trainer.py").read_text(), n) or ""
                          for n in ast.walk(ast.parse((repo / "hf_trainer.py").read_text()))
                          if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "TrainingArguments"))
    assert made["logging_nan_inf_filter"] == "False"
    assert made["dataloader_num_workers"] == shown["dataloader_num_workers"], (made, shown)
