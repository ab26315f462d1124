"""unobserved-child-processes: the training is the children's only where the main process
trained no step itself; its words count the processes right."""

from __future__ import annotations

import multiprocessing
import sys
from typing import Any

from mpsprofiler.diagnosis.analyzers.loops import child_start_facts, main_training_steps
from mpsprofiler.diagnosis.engine import evaluate
from mpsprofiler.diagnosis.rules import builtin_rules_dir, load_rules
from mpsprofiler.probe.children import describe

RULE = "unobserved-child-processes"


def _finding(**facts: Any) -> Any:
    rules = [r for r in load_rules([builtin_rules_dir() / "step-signal.yaml"]) if r.id == RULE]
    base = {"child_targets": "train", "child_start_methods": "spawn", "step_count": 0,
            "step_signal_words": "no step signal", "child_start": "process"}
    found = evaluate(rules, {**base, **facts}, "cpu")
    return found[0] if found else None


def test_main_training_steps_are_optimizer_backward_or_marked_steps_only() -> None:
    assert main_training_steps("optimizer", 90) == 90
    assert main_training_steps("backward", 5) == 5
    assert main_training_steps("manual", 3) == 3
    assert main_training_steps("dataloader", 3) == 0  # Hogwild's parent evaluating
    assert main_training_steps(None, 0) == 0


def test_helpers_beside_a_main_process_that_trains_are_no_finding() -> None:
    """Before: any child process fired the warning, a Pool scoring checkpoints too."""
    assert _finding(child_processes=2, main_training_steps=90) is None
    assert _finding(child_processes=2, main_training_steps=0) is not None
    assert _finding(child_processes=0, main_training_steps=0) is None


def test_one_child_process_is_singular() -> None:
    """Before: "Training in 1 child processes was not observed"."""
    one = _finding(child_processes=1, main_training_steps=0)
    assert one.title == "Training in 1 child process was not observed"
    assert "started 1 child process itself" in one.evidence
    two = _finding(child_processes=2, main_training_steps=0)
    assert two.title == "Training in 2 child processes was not observed"


def _no_step_signal(**facts: Any) -> Any:
    rules = [r for r in load_rules([builtin_rules_dir() / "step-signal.yaml"]) if r.id == "no-step-signal"]
    base = {"step_count": 0, "torch_imported": True, "run_s": 7.0, "run_ended": True,
            "recording_complete": True, "crashed": False}
    found = evaluate(rules, {**base, **facts}, "cpu")
    return found[0] if found else None


def test_a_main_process_that_only_started_trainers_is_not_told_to_mark_steps() -> None:
    """Before: mp.spawn's parent got "mark them with mpsprofiler.step()" beside the
    unobserved-training warning; a step marked there would not see the children's training."""
    assert _no_step_signal(child_processes=2) is None
    assert _no_step_signal(child_processes=0) is not None  # a loop nothing counts: still told


def test_the_spawn_fix_names_the_spawned_function_and_the_line() -> None:
    spawn = _finding(child_processes=2, main_training_steps=0, child_start="spawn", child_targets="worker",
                     child_site="train.py:40", child_site_code="mp.spawn(worker, nprocs=2)")
    assert "# train.py:40: in place of `mp.spawn(worker, nprocs=2)`" in spawn.fix
    assert 'worker(int(os.environ["RANK"]), ...)' in spawn.fix and "--nproc-per-node N" in spawn.fix
    assert "Hogwild" not in spawn.fix
    hogwild = _finding(child_processes=2, main_training_steps=0)  # no line recorded: no line shown
    assert "Hogwild" in hogwild.fix and "in place of `" not in hogwild.fix and "starts a trainer" not in hogwild.fix


def _target() -> None:
    pass


def test_a_started_process_is_described_with_the_scripts_line() -> None:
    process = multiprocessing.get_context("spawn").Process(target=_target)
    line = sys._getframe().f_lineno + 1
    fields = describe(process)
    assert fields is not None
    assert fields["via"] == "process" and fields["file"] == __file__ and fields["line"] == line
    facts = child_start_facts([{**fields, "pid": 1}])
    assert facts["child_start"] == "process"
    assert facts["child_site"] == f"test_child_processes_rule.py:{line}"
    assert facts["child_site_code"] == "fields = describe(process)"
    assert child_start_facts([]) == {}
