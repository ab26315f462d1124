"""unobserved-child-processes: the training is the children's only where the main process
trained no step itself; its words count the processes right."""

from __future__ import annotations

from typing import Any

from mpsprofiler.diagnosis.analyzers.loops import main_training_steps
from mpsprofiler.diagnosis.engine import evaluate
from mpsprofiler.diagnosis.rules import builtin_rules_dir, load_rules

RULE = "unobserved-child-processes"


def _finding(**facts: Any) -> Any:
    rules = [r for r in load_rules([builtin_rules_dir() / "step-signal.yaml"]) if r.id == RULE]
    base = {"child_targets": "train", "child_start_methods": "spawn", "step_count": 0,
            "step_signal_words": "no step signal"}
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
