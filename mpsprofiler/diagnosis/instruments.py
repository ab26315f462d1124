"""Facts a failed probe instrument leaves without a basis, and their removal.

An instrument that raised is switched off in the probe and reported once
(``probe_error``). Whatever it would have measured afterwards is missing, so facts built
on it describe part of the run at best: a step counter that died after one step gives
``step_count == 1`` and "no training steps", a dead memory sampler gives a flat memory
curve ("no leak"). Those facts are removed before the rules run: a rule naming one is
then not evaluated (engine: a missing fact is "not matched"), never a conclusion drawn
from a dead instrument. The run's notes still say which instrument was switched off.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

STEP_ANALYZERS = ("loops", "warmup", "dataloader", "memory", "leaks", "capacity", "ops", "crash")
"""Analyzers whose facts are figures per step (or the step count itself)."""

DEPENDS: dict[str, tuple[str, ...]] = {
    "steps": STEP_ANALYZERS,
    "memory": ("memory", "leaks", "capacity"),
    "ops": ("ops", "float64_fix", "sync_fix"),
    "dataloader": ("dataloader",),
    "env": ("environment", "threads"),
    "health": ("health",),
    "device_time": ("host_bound",),
}
"""Instrument (as the probe names it in ``probe_error``) -> analyzers built on it."""

KEEP = frozenset({"child_processes", "child_start_methods", "child_targets", "run_ended", "run_s", "torch_imported"})
"""Facts of those analyzers that no instrument but the launcher's own measures."""


def dead_analyzers(errors: Iterable[Mapping[str, object]], step_mode: str) -> set[str]:
    """The analyzers whose facts lost their basis. The backward hook counts the steps only
    where no optimizer (or ``mpsprofiler.step()``) does: there its failure is the step
    counter's; with an optimizer it loses only the backward-pass timing."""
    dead: set[str] = set()
    for error in errors:
        instrument = str(error.get("instrument") or "")
        if instrument == "backward" and step_mode not in ("optimizer", "manual"):
            instrument = "steps"
        dead.update(DEPENDS.get(instrument, ()))
    return dead


def drop_dead_facts(facts: dict[str, Any], provides: dict[str, frozenset[str]], dead: set[str]) -> list[str]:
    """Remove from ``facts`` what the ``dead`` analyzers provide (their ``provides``);
    returns the names removed, sorted."""
    removed = sorted({name for a in dead for name in provides.get(a, ()) if name in facts and name not in KEEP})
    for name in removed:
        del facts[name]
    return removed
