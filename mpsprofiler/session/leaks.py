"""Leak sites and autograd graphs kept across steps: the session's fold of ``leaks`` events.

The probe sends its whole current picture in each event (see
:mod:`mpsprofiler.probe.ops_leaks`), so the last event wins; rows are capped and every
field is checked, as for any recording read back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..events.payloads import LeaksFields

MAX_ROWS = 20


@dataclass
class LeakSite:
    file: str
    line: int
    module: str
    op: str
    code: str
    alive: int
    bytes: int
    steps: list[int] = field(default_factory=list)
    grad: bool = False
    holder: str = ""
    holder_file: str = ""
    holder_line: int = 0
    holder_code: str = ""
    holder_size: int = 0
    holder_step: int = 0
    holder_size0: int = 0
    holder_step0: int = 0
    """The container's length when first found and at the last check (its growth rate)."""
    holder_bytes: int = 0
    holder_bytes0: int = 0
    """Bytes of the tensors the container held at the last check and when first found (0:
    not measured, or an older recording): its growth in bytes, whatever size the items
    added between the sampled steps had."""
    alive_one: int | None = None
    """Tensors alive when the site was first reported from one sampled step only (None: never
    was). Made on two sampled steps but no more alive than from one: the line's tensors are
    replaced, not kept (nanoGPT's ``checkpoint = {'model': raw_model.state_dict(), ...}``
    at every evaluation), so they do not pile up."""
    scalar: bool = False
    """Every kept tensor holds one element (a loss, a metric): ``.item()`` keeps each as a
    number (False where not, or the recording predates this field)."""
    graph_nodes: int | None = None
    """Autograd nodes the kept tensors' graphs hold, and ``graph_bytes`` the tensors those
    graphs saved for a backward and still hold (None: not measured, no graph or an older
    recording). A loss kept with its graph is 4 bytes of its own."""
    graph_bytes: int = 0
    graph_capped: bool = False
    """The walk stopped at its cap: ``graph_nodes`` is a lower bound."""


@dataclass
class GraphCarry:
    file: str
    line: int
    name: str
    code: str
    steps: list[int] = field(default_factory=list)
    nodes: int = 0
    """Autograd nodes its graph held at step ``at`` (0: not measured), ``capped`` when the
    walk stopped there; ``saved``: bytes of tensors those nodes saved and still held."""
    saved: int = 0
    capped: bool = False
    at: int = 0


@dataclass
class KeptBetween:
    """A list grown between the steps (an evaluation pass's appends) with tensors that keep
    their autograd graphs (probe/leak_between.py): ``size0`` items at step ``step0``, ``size``
    at ``step``; ``nodes`` and ``saved`` (bytes) what the last item's graph held."""

    name: str
    file: str
    line: int
    code: str
    size0: int
    step0: int
    size: int
    step: int
    nodes: int = 0
    saved: int = 0


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _str(value: Any, limit: int = 1000) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _steps(value: Any) -> list[int]:
    return [_int(v) for v in value[:50]] if isinstance(value, list) else []


class LeakStats:
    def __init__(self) -> None:
        self.sites: list[LeakSite] = []
        self.carries: list[GraphCarry] = []
        self.between: list[KeptBetween] = []
        self.lag = 2
        self.checks = 0
        self._alive_one: dict[tuple[str, int, str], int] = {}

    def feed(self, data: LeaksFields) -> None:
        if not isinstance(data, dict):
            return
        self.checks += 1
        self.lag = _int(data.get("lag")) or self.lag
        sites = data.get("sites")
        if isinstance(sites, list):
            self.sites = [_site(s) for s in sites[:MAX_ROWS] if isinstance(s, dict)]
            for site in self.sites:
                key = (site.file, site.line, site.op)
                if len(site.steps) == 1 and key not in self._alive_one and len(self._alive_one) < 1000:
                    self._alive_one[key] = site.alive
                site.alive_one = self._alive_one.get(key)
        carries = data.get("carries")
        if isinstance(carries, list):
            self.carries = [GraphCarry(_str(c.get("file")), _int(c.get("line")), _str(c.get("name"), 200),
                                       _str(c.get("code"), 300), _steps(c.get("steps")), _int(c.get("nodes")),
                                       _int(c.get("saved")), c.get("capped") is True, _int(c.get("at")))
                            for c in carries[:MAX_ROWS] if isinstance(c, dict)]  # fmt: skip
        between = data.get("between")
        if isinstance(between, list):
            self.between = [KeptBetween(_str(b.get("name"), 200), _str(b.get("file")), _int(b.get("line")),
                                        _str(b.get("code"), 300), _int(b.get("size0")), _int(b.get("step0")),
                                        _int(b.get("size")), _int(b.get("step")), _int(b.get("nodes")),
                                        _int(b.get("saved")))
                            for b in between[:MAX_ROWS] if isinstance(b, dict)]  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {"lag": self.lag, "sites": [vars(s).copy() for s in self.sites],
                "carries": [vars(c).copy() for c in self.carries],
                "between": [vars(b).copy() for b in self.between]}  # fmt: skip


def _site(s: dict[str, Any]) -> LeakSite:
    holder = s.get("holder")
    if not isinstance(holder, dict):
        holder = {}
    return LeakSite(_str(s.get("file")), _int(s.get("line")), _str(s.get("module"), 300), _str(s.get("op"), 200),
                    _str(s.get("code"), 300), _int(s.get("alive")), _int(s.get("bytes")), _steps(s.get("steps")),
                    bool(s.get("grad")), _str(holder.get("name"), 200), _str(holder.get("file")),
                    _int(holder.get("line")), _str(holder.get("code"), 300), _int(holder.get("size")),
                    _int(holder.get("step")), _int(holder.get("size0")), _int(holder.get("step0")),
                    holder_bytes=_int(holder.get("held")), holder_bytes0=_int(holder.get("held0")),
                    scalar=s.get("scalar") is True,
                    graph_nodes=_int(s.get("graph_nodes")) if "graph_nodes" in s else None,
                    graph_bytes=_int(s.get("graph_bytes")), graph_capped=s.get("graph_capped") is True)
