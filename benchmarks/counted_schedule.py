"""The probe's time thresholds set out of reach in a traced or counted run (no torch, no mpsprofiler import).

Under callgrind or a tracer a step lasts tens of times longer than untraced: every
DataLoader fetch would read as long (``cputime.LONG_FETCH``) and have its clocks read, and
the run-queue file would be read whenever the slowed thread waited (``RUNQ_SLACK``,
``RUNQ_SPAN``), which moves a count by thousands of instructions between runs. With the
thresholds at infinity such a run follows an untraced quiet run's schedule. This module
imports nothing heavy, so a bare benchmark process (``callgrind_window.py``) can call it
without loading mpsprof; ``step_cost.py`` re-exports it for the in-process benchmarks.
"""

from __future__ import annotations

import importlib
import sys

THRESHOLDS = ("LONG_FETCH", "READ_AFTER", "RUNQ_SLACK", "RUNQ_SPAN")


def out_of_reach(thresholds: tuple[str, ...] = THRESHOLDS,
                 packages: tuple[str, ...] = ("mpsprofiler", "mpsprofiler_baseline")) -> None:  # fmt: skip
    """Set the probe's time ``thresholds`` to infinity in each *loaded* package (a package
    not imported is left alone: a bare run stays bare)."""
    set_thresholds(dict.fromkeys(thresholds, float("inf")), packages)


def set_thresholds(values: dict[str, float], packages: tuple[str, ...] = ("mpsprofiler",)) -> None:
    """Set each of the probe's time thresholds in ``values`` in ``cputime``, ``steps`` and
    ``fetch_path`` of each loaded package, where the module has it (``fetch_clock_cost.py``
    sets one back and forth). The modules read them as globals at every fetch."""
    for name in packages:
        if name not in sys.modules:
            continue
        for module_name in (f"{name}.probe.cputime", f"{name}.probe.steps", f"{name}.probe.fetch_path"):
            try:
                module = importlib.import_module(module_name)
            except ImportError:  # (a version without that module)
                continue
            for threshold, value in values.items():
                if hasattr(module, threshold):
                    setattr(module, threshold, value)
