"""Helpers for the op-accounting tests: load an example and drive an OpAccountant the
way the probe's step tracker does (a boundary at every optimizer step)."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from mpsprofiler.probe.ops import OpAccountant

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load_example(name: str) -> ModuleType:
    """Import ``examples/<name>.py`` without leaving environment changes behind."""
    saved = dict(os.environ)
    try:
        spec = importlib.util.spec_from_file_location(f"mpsprof_example_{name}", EXAMPLES / f"{name}.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        os.environ.clear()
        os.environ.update(saved)


class StepDriver:
    """Calls ``on_step_boundary`` after every optimizer step, like the probe's tracker."""

    def __init__(self, accountant: OpAccountant) -> None:
        self.accountant = accountant
        self.index = 0
        self._start = 0.0
        self._handle: Any = None

    def __enter__(self) -> StepDriver:
        from torch.optim.optimizer import register_optimizer_step_post_hook

        self._handle = register_optimizer_step_post_hook(self._hook)
        self._start = time.perf_counter()
        self.accountant.on_step_boundary(0, None)
        return self

    def _hook(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        now = time.perf_counter()
        duration, self._start = now - self._start, now
        self.index += 1
        self.accountant.on_step_boundary(self.index, duration)

    def __exit__(self, *exc: object) -> None:
        self._handle.remove()
        self.accountant.close()


Events = list[tuple[str, dict[str, Any]]]


def recorder() -> tuple[Events, Callable[..., None]]:
    events: Events = []

    def emit(kind: str, **fields: Any) -> None:
        events.append((kind, fields))

    return events, emit


def run_example(name: str, steps: int, seed: int = 0, accountant: bool = True,
                **options: Any) -> tuple[Events, torch.nn.Module]:  # fmt: skip
    """Train an example on the CPU for ``steps`` steps; (events, trained model)."""
    example = load_example(name)
    events, emit = recorder()
    torch.manual_seed(seed)
    if not accountant:
        return events, example.train(steps, torch.device("cpu"))
    with StepDriver(OpAccountant(emit, **options)):
        model = example.train(steps, torch.device("cpu"))
    return events, model


def ops_events(events: Events) -> list[dict[str, Any]]:
    return [fields for kind, fields in events if kind == "ops"]


def same_parameters(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    pa, pb = list(a.parameters()), list(b.parameters())
    return len(pa) == len(pb) and all(torch.equal(x, y) for x, y in zip(pa, pb, strict=True))


@pytest.fixture(autouse=True, scope="module")
def private_cache(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Keep the readiness cache out of the user's home while testing."""
    patch = pytest.MonkeyPatch()
    patch.setenv("MPSPROF_CACHE_DIR", str(tmp_path_factory.mktemp("mpsprof-cache")))
    yield
    patch.undo()
