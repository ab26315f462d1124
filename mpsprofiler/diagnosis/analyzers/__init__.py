"""Builtin analyzers; importing this package registers them in :mod:`.registry`.

Each module computes one family of facts and declares them. The import order below is the
order facts are collected in (and appear in ``summary.json``). A new analyzer is one module
with an ``@analyzer(name, provides=...)`` function plus its name in this import.
"""

from __future__ import annotations

# isort: off
from . import (  # noqa: F401 - registers on import, in this order
    capacity,
    crash,
    carried,
    device_choice,
    dataloader,
    framework,
    environment,
    leaks,
    loops,
    memory,
    threads,
    warmup,
    ranks,
    ops,
    health,
    host_bound,
    copies,
    float64_fix,
    sync_fix,
    anomaly,
)

# isort: on
from .registry import ANALYZERS, Analyzer, DuplicateFact, analyzer, provider_of

__all__ = ["ANALYZERS", "Analyzer", "DuplicateFact", "analyzer", "provider_of"]
