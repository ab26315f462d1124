"""The loader fix names the script's own place and never invents a ``main()`` (issue 28).

A Trainer's fix is its ``TrainingArguments(...)`` call (the one the Trainer that started the
loader uses); a Lightning-style or plain loader's fix is its construction line. With workers,
spawn-started workers (macOS) re-import the script, so a script without an
``if __name__ == "__main__":`` guard is told where its top-level code starts, as written:
``run(parse_args())``, ``train(load_config())`` or the training itself at module level.

transformers is not needed: the Trainer's part reads real scripts (never run) for a real
Session; the loader's part runs real scripts through the real CLI.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from mpsprofiler.diagnosis.analyzers.framework_place import trainer_place
from mpsprofiler.diagnosis.engine import phrase_for
from mpsprofiler.diagnosis.rules import builtin_rules_dir, load_rules
from mpsprofiler.session.session import Session
from tests.helpers import REPO, child_env, mpsprof_cli

PLACE = REPO / "tests" / "scripts_place2"
HF_TRAINER = REPO / "tests" / "scripts_frameworks" / "hf_trainer.py"


def _line(path: Path, text: str) -> int:
    return next(i for i, t in enumerate(path.read_text().splitlines(), 1) if text in t)


def _trainer_session(script: Path) -> Session:
    session = Session()
    session.run = {"target": str(script.relative_to(REPO)), "cwd": str(REPO), "module": False}
    session.model = {"framework": "transformers Trainer"}
    return session


def _guard(code: str) -> str:
    """The guard part of a snippet (after the rewritten call)."""
    assert 'if __name__ == "__main__":' in code, code
    return code.split("\n\n", 1)[1]


def test_a_module_level_trainer_script_is_told_where_its_code_starts() -> None:
    script = PLACE / "hf_module_level.py"
    place = trainer_place(_trainer_session(script), str(script), _line(script, "trainer.train()"), 4)
    assert place is not None
    arguments = f"tests/scripts_place2/hf_module_level.py:{_line(script, 'args = TrainingArguments(')}"
    assert place["loader_place"] == arguments
    assert place["loader_where"] == "trainer_rewrite"  # a code: the rule file words it
    words = next(iter(load_rules([builtin_rules_dir() / "dataloader-stall.yaml"]))).phrases
    assert phrase_for(words, place, "loader_where", ()) == \
        f"The Trainer builds it from its `TrainingArguments`: change them ({arguments}) to"
    code = place["loader_code"]
    assert "dataloader_num_workers=4" in code and "dataloader_num_workers=0" not in code
    assert "main()" not in code, code
    guard = _guard(code)
    start, end = _line(script, "torch.manual_seed(0)"), _line(script, "trainer.train()")
    assert f"tests/scripts_place2/hf_module_level.py:{start} to line {end}" in guard, guard
    assert guard.endswith('if __name__ == "__main__":\n    torch.manual_seed(0)\n    ...'), guard


def test_a_trainer_started_in_train_cfg_rewrites_its_own_arguments() -> None:
    """The TrainingArguments of train(), where trainer.train() is, not evaluation_args()'s
    (first in the file); the guard wraps the script's own call, `train(load_config())`."""
    script = PLACE / "hf_train_func.py"
    place = trainer_place(_trainer_session(script), str(script), _line(script, "trainer.train()"), 2)
    assert place is not None
    arguments = _line(script, "args = TrainingArguments(")
    assert place["loader_place"] == f"tests/scripts_place2/hf_train_func.py:{arguments}"
    code = place["loader_code"]
    assert code.startswith("args = TrainingArguments(") and "max_steps=cfg[\"steps\"]" in code, code
    assert "per_device_eval_batch_size" not in code
    assert "main()" not in code, code
    call = _line(script, "train(load_config())")
    assert f"`train(load_config())` (tests/scripts_place2/hf_train_func.py:{call})" in _guard(code), code
    assert code.endswith('if __name__ == "__main__":\n    train(load_config())'), code


def test_a_script_with_its_guard_gets_none_and_workers_0_need_none() -> None:
    session = _trainer_session(HF_TRAINER)
    line = _line(HF_TRAINER, "trainer.train()")
    place = trainer_place(session, str(HF_TRAINER), line, 2)
    assert place is not None and "__main__" not in place["loader_code"]
    script = PLACE / "hf_module_level.py"
    place = trainer_place(_trainer_session(script), str(script), _line(script, "trainer.train()"), 0)
    assert place is not None and "__main__" not in place["loader_code"]


# -- a plain / Lightning-shaped loader, through the real CLI ---------------------------------
def _loader_fix(tmp: Path, script: str) -> tuple[str, dict[str, Any]]:
    """The recording's loader snippet (a fact whichever loader rule fired) and the summary."""
    from mpsprofiler.diagnosis.facts import collect_facts
    from mpsprofiler.session.recording import load_run

    out = tmp / "run"
    proc = mpsprof_cli("run", "--headless", "-o", str(out), str(PLACE / script), "60", cwd=REPO, env=child_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    facts = collect_facts(load_run(out).session)
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    code = str(facts.get("loader_code") or "")
    for f in summary["findings"]:
        if f["rule"] in ("dataloader-stall", "dataloader-stall-critical"):
            assert code.split("\n")[-1] in f["fix"], f["fix"]  # the finding shows this snippet
    return code, summary


@pytest.mark.slow
def test_a_loader_built_at_module_level_names_where_the_code_starts(tmp_path: Path) -> None:
    script = PLACE / "loader_module_level.py"
    code, _ = _loader_fix(tmp_path, script.name)
    assert re.sub(r"\s+", "", code).startswith("loader=DataLoader(SlowReads(),batch_size=BATCH,shuffle=True,"
                                               "num_workers="), code
    assert "main()" not in code, code
    guard = _guard(code)
    start, end = _line(script, "torch.manual_seed(0)"), _line(script, 'print("done")')
    assert f"tests/scripts_place2/loader_module_level.py:{start} to line {end}" in guard, guard
    assert guard.endswith('if __name__ == "__main__":\n    torch.manual_seed(0)\n    ...'), guard


@pytest.mark.slow
def test_a_loader_in_train_dataloader_guards_the_scripts_run_call(tmp_path: Path) -> None:
    script = PLACE / "loader_run_args.py"
    code, _ = _loader_fix(tmp_path, script.name)
    assert re.sub(r"\s+", "", code).startswith("returnDataLoader(self.train_set,batch_size=self.batch,"), code
    assert "main()" not in code, code
    call = _line(script, "run(parse_args())")
    assert f"`run(parse_args())` (tests/scripts_place2/loader_run_args.py:{call})" in _guard(code), code
    assert code.endswith('if __name__ == "__main__":\n    run(parse_args())'), code


def test_a_trainer_whose_arguments_come_from_the_command_line_is_told_the_flags(tmp_path: Path) -> None:
    """HfArgumentParser (the transformers examples' run_*.py): no ``TrainingArguments(...)``
    call to change, so the fix was a snippet of one the user could not apply and `patch`
    found nothing. The settings go on the recorded command line, a flag it has replaced."""
    script = tmp_path / "run_cls.py"
    script.write_text("from transformers import HfArgumentParser, Trainer, TrainingArguments\n"
                      "def main():\n    (args,) = HfArgumentParser((TrainingArguments,)).parse_args_into_dataclasses()\n"
                      "    Trainer(model=None, args=args).train()\n"
                      'if __name__ == "__main__":\n    main()\n')
    session = Session()
    session.run = {"target": str(script), "cwd": str(tmp_path), "module": False,
                   "argv": [str(script), "--output_dir", "out dir", "--dataloader_num_workers=0", "--max_steps", "40"]}
    session.model = {"framework": "transformers Trainer"}
    place = trainer_place(session, str(script), 4, 4)
    assert place is not None and place["loader_where"] == "trainer_cli", place
    code = place["loader_code"]
    assert code.startswith("# --dataloader_num_workers 4 --dataloader_persistent_workers true\n"), code
    command = " ".join(line.lstrip("# ").rstrip(" \\") for line in code.splitlines()[2:])
    assert command == ("python run_cls.py --output_dir 'out dir' --dataloader_num_workers=4 --max_steps 40 "
                       "--dataloader_persistent_workers true"), command
    assert all(len(line) <= 80 for line in code.splitlines()), code
    words = next(iter(load_rules([builtin_rules_dir() / "dataloader-stall.yaml"]))).phrases
    assert "which the script reads from its command line" in phrase_for(words, place, "loader_where", ())
