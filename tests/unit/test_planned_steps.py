"""A framework's announced run length (``probe/frameworks.planned_steps``), read from its
own objects on the stack at the first optimizer step.

The real Trainer and Lightning runs are in ``tests/e2e/test_frameworks.py`` (the framework
stage); here the reading's edges: a length not set (-1), an endless loader (inf), a
Lightning property that raises, a plain loop, and no framework imported at all.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

import pytest

from mpsprofiler.probe.frameworks import planned_steps


def _framework_call(module: str, owner: Any) -> int | None:
    """``planned_steps()`` called from a method of ``owner`` in a frame of ``module``."""
    namespace: dict[str, Any] = {"__name__": module, "planned_steps": planned_steps}
    exec("def step(self):\n    return planned_steps()\n", namespace)
    return namespace["step"](owner)


def _cls(module: str, name: str, **attrs: Any) -> type:
    return type(name, (), {"__module__": module, **attrs})


@pytest.fixture(autouse=True)
def _frameworks_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("transformers", "lightning"):
        monkeypatch.setitem(sys.modules, name, sys.modules.get(name) or types.ModuleType(name))


def test_a_hugging_face_trainer_announces_its_max_steps() -> None:
    trainer = _cls("transformers.trainer", "Trainer")()
    trainer.state = types.SimpleNamespace(max_steps=200)
    assert _framework_call("transformers.trainer", trainer) == 200
    trainer.state.max_steps = 0  # not yet set
    assert _framework_call("transformers.trainer", trainer) is None
    # the script's own subclass (a custom compute_loss), called from the Trainer's loop
    mine = type("PlotTrainer", (_cls("transformers.trainer", "Trainer"),), {"__module__": "__main__"})()
    mine.state = types.SimpleNamespace(max_steps=80)
    assert _framework_call("transformers.trainer", mine) == 80


def _lightning(loader: Any, stepping: Callable[[Any], Any] | float, max_steps: int) -> Any:
    prop = property(stepping if callable(stepping) else (lambda self: stepping))
    trainer = _cls("lightning.pytorch.trainer.trainer", "Trainer", estimated_stepping_batches=prop)()
    trainer.train_dataloader, trainer.max_steps = loader, max_steps
    return types.SimpleNamespace(trainer=trainer)  # a loop object: its trainer is an attribute


def test_a_lightning_trainer_announces_its_stepping_batches_or_max_steps() -> None:
    loop = "lightning.pytorch.loops.fit_loop"
    assert _framework_call(loop, _lightning(object(), 120, -1)) == 120
    assert _framework_call(loop, _lightning(object(), float("inf"), -1)) is None  # endless, no max_steps
    assert _framework_call(loop, _lightning(object(), float("inf"), 50)) == 50

    def not_set_up(self: Any) -> int:
        raise AssertionError("the property would set up the training loader itself")

    assert _framework_call(loop, _lightning(None, not_set_up, 80)) == 80  # not read: max_steps

    def raises(self: Any) -> int:
        raise RuntimeError("different accumulate_grad_batches at different epochs")

    assert _framework_call(loop, _lightning(object(), raises, -1)) is None


def test_a_plain_loop_or_a_library_model_announces_nothing() -> None:
    assert planned_steps() is None  # this test's own frames: no framework's
    model = _cls("transformers.models.bert.modeling_bert", "BertModel")()
    assert _framework_call("transformers.models.bert.modeling_bert", model) is None


def test_nothing_is_read_without_a_framework_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("transformers", "lightning", "pytorch_lightning"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    trainer = _cls("transformers.trainer", "Trainer")()
    trainer.state = types.SimpleNamespace(max_steps=200)
    assert _framework_call("transformers.trainer", trainer) is None


def _raised_in(module: str, function: str) -> BaseException:
    """An exception raised in ``function`` of a frame of ``module``, caught with its traceback."""
    namespace: dict[str, Any] = {"__name__": module}
    exec(f"def {function}():\n    raise RuntimeError('first step')\n", namespace)
    try:
        namespace[function]()
    except RuntimeError as exc:
        return exc
    raise AssertionError("not raised")


@pytest.mark.parametrize(("module", "function", "training"), [
    ("transformers.trainer", "_inner_training_loop", True),
    ("lightning.pytorch.trainer.trainer", "_fit_impl", True),
    ("pytorch_lightning.trainer.trainer", "fit", True),
    ("transformers.trainer", "predict", False),  # an inference loop of the Trainer
    ("lightning.pytorch.trainer.trainer", "validate", False),
    ("__main__", "train", False),
])
def test_a_crash_says_whether_it_came_out_of_a_framework_training_entry(module: str, function: str,
                                                                        training: bool) -> None:
    from mpsprofiler.probe.frameworks import in_training

    assert in_training(_raised_in(module, function).__traceback__) is training
    assert in_training(None) is False
