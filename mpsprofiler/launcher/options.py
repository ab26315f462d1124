"""What the probe is asked to do, as one typed value built once and copied, never mutated.

The options cross two seams: from the commands (``run``, the TUI, a ``try`` trial) to the
launcher, and from the launcher into the training process (``MPSPROF_OPTIONS``, JSON, read
by ``probe/probe.py`` and ``probe/boot.py``). Above the launcher they are this frozen
dataclass, so a reader sees every option and its type in one place and no caller can change
another's spec behind its back; :meth:`ProbeOptions.to_wire` is the one place that turns
them into the probe's JSON (the probe cannot import this module: it sits below the launcher).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..probe.ops_schedule import DEFAULT_BUDGET

DEFAULT_OPS_BUDGET = DEFAULT_BUDGET
"""The share of the training time op accounting may take (``--ops-budget``; it spends a
tenth of that once the ops per step stop changing). Why 0.3%: ``probe/ops_schedule.py``'s
``DEFAULT_BUDGET``, the one value the probe's own default reads too."""


@dataclass(frozen=True)
class ProbeOptions:
    no_ops: bool = False
    """``--no-ops``: no op accounting (trials run without it: they compare times)."""
    ops_budget: float = DEFAULT_OPS_BUDGET
    settings: Mapping[str, Any] = field(default_factory=dict)
    """``--set`` changes, parsed (``mpsprofiler.settings.parse_settings``). Copied once when
    the options are built and held read-only (see ``__post_init__``)."""
    max_steps: int | None = None
    max_seconds: float | None = None
    terminal_loan: bool = False
    """The TUI owns the terminal: the probe borrows it for ``input()`` and ``breakpoint()``."""
    line_buffered: bool = False
    """The script's output is captured: make its stdout line-buffered as a terminal's is."""
    no_memory: bool = False
    headless: bool = False
    """No live view reads the events before the run ends (``mpsprof run --headless``): the
    probe's channel flushes half as often (``probe/channel.py``)."""
    fault: tuple[str, ...] = ()
    """Tests only: probe instruments made to raise (fault injection)."""

    def __post_init__(self) -> None:
        """Copy ``settings`` once into a read-only view: the caller's dict (a trial's base
        settings, shared by all its runs) may change later without changing these options,
        and nobody on the way to the probe can change them through this value."""
        frozen = MappingProxyType(copy.deepcopy(dict(self.settings)))
        object.__setattr__(self, "settings", frozen)  # frozen dataclass: set once, here

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (and so copied, deep-copied) through its wire form: a mappingproxy
        itself cannot be pickled or deep-copied."""
        return (ProbeOptions.from_wire, (self.to_wire(),))

    def with_changes(self, **changes: Any) -> ProbeOptions:
        """A copy with ``changes``; this one is left as it is."""
        return dataclasses.replace(self, **changes)

    def to_wire(self) -> dict[str, Any]:
        """The JSON object of ``MPSPROF_OPTIONS``: only what differs from the defaults, so
        the probe's own defaults (``options.get(name)``) read the same."""
        out: dict[str, Any] = {}
        defaults = ProbeOptions()
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value != getattr(defaults, f.name):
                out[f.name] = dict(value) if isinstance(value, Mapping) else list(value) if isinstance(value, tuple) else value
        if "ops_budget" not in out:
            out["ops_budget"] = self.ops_budget
        return out

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> ProbeOptions:
        """The inverse of :meth:`to_wire` for a JSON object (unknown names are refused)."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"unknown probe option(s): {', '.join(sorted(unknown))}")
        values = dict(data)
        if "fault" in values:
            values["fault"] = tuple(values["fault"])
        return cls(**values)
