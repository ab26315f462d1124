"""Op accounting across sampled steps: the session's fold of ``ops`` events.

Each ``ops`` event describes one sampled step (see :mod:`mpsprofiler.probe.ops`). This
keeps per-(op, module) totals, syncs by source line, float64 sites, placement mismatches
and MPS kernel misses, all capped so that a run of any length (or a hostile recording)
holds bounded memory. Rates are "per sampled step": totals divided by the number of
sampled steps, so an op seen in one step of ten counts a tenth.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..events.payloads import OpsFields

if TYPE_CHECKING:
    from ..kernels.readiness import MpsKernelTable

MAX_KEYS = 2_000
OTHER = "*"
_NOT_ATEN = ("profiler::", "prim::")
MAX_SAMPLED_KEPT = 4_096
"""Module name of the bucket that takes new (op, module) keys once the cap is reached."""


@dataclass
class OpRow:
    op: str
    module: str
    steps: int = 0
    calls: int = 0
    host_s: float = 0.0
    devices: set[str] = field(default_factory=set)
    dtypes: set[str] = field(default_factory=set)
    file: str = ""
    line: int = 0


@dataclass
class SyncRow:
    kind: str
    op: str
    module: str
    file: str
    line: int
    code: str = ""
    calls: int = 0
    steps: int = 0
    predicted: bool = False
    vias: dict[tuple[str, int, str, str], int] = field(default_factory=dict)
    """Calls per library frame they passed through inside the user's line: (file, line,
    function, the statement's source). A framework's own reads (a Trainer's loss check)
    are told apart from the script's there."""

    @property
    def via(self) -> tuple[str, int, str, str] | None:
        """The library frame most of this line's calls came through, or None."""
        if not self.vias:
            return None
        return max(self.vias.items(), key=lambda kv: (kv[1], kv[0]))[0]


@dataclass
class SiteRow:
    module: str
    file: str
    line: int
    op: str = ""
    code: str = ""
    calls: int = 0


MAX_VIAS = 8
"""Library frames kept per sync line (a line calls a few functions of a framework)."""


def _via_key(via: dict[str, Any]) -> tuple[str, int, str, str]:
    return (_str(via.get("file"), 1000), _int(via.get("line")), _str(via.get("function"), 200),
            _str(via.get("code"), 300))


def _via_fields(via: tuple[str, int, str, str] | None) -> dict[str, Any]:
    if via is None:
        return {}
    return {"via": {"file": via[0], "line": via[1], "function": via[2], "code": via[3]}}


def _str(value: Any, limit: int = 300) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _float(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


class OpStats:
    """Aggregates of every ``ops`` event fed; tolerant of missing or odd fields."""

    def __init__(self, max_keys: int = MAX_KEYS) -> None:
        self.max_keys = max_keys
        self.sampled_steps = 0
        self.first_step: int | None = None
        self.last_step: int | None = None
        self.device_kind: str | None = None
        self.model_device: str | None = None
        self.host_s = 0.0
        self.overhead_s = 0.0
        self.overhead_steps = 0
        self.cost_s: float | None = None
        """What op accounting cost the run so far, all of it (the probe's running estimate:
        sampled steps, the step after each, leak checks)."""
        self.converged = False
        self.interval: int | None = None
        self.ops: dict[tuple[str, str], OpRow] = {}
        self.syncs: dict[tuple[str, str, int, str], SyncRow] = {}
        self.float64_calls = 0
        self.float64_sites: dict[tuple[str, str, int], SiteRow] = {}
        self.bfloat16_calls = 0
        self.complex_calls = 0
        self.mismatches: dict[str, dict[str, Any]] = {}
        self.mps_misses: dict[tuple[str, str], OpRow] = {}
        self.dropped = 0
        self.cut_steps = 0
        """Sampled steps whose sample was cut short (``truncated``: the probe's time cap, see
        probe/ops.py ``SAMPLE_CAP_STEPS``): their counts stop at the cut, so per-step counts
        are lower bounds (a step of 5,000 reads read as 3,584 per step)."""
        self.anomaly_steps = 0
        """Sampled steps whose backward pass ran with autograd's anomaly detection on."""
        self.anomaly_check_nan = False
        self.anomaly_sites: list[dict[str, Any]] = []
        """The script's lines that turned it on (file, line, calls), the latest report of each."""
        self.sampled: set[int] = set()
        """Indices of the sampled steps (first MAX_SAMPLED_KEPT): their timings carry the
        accounting's own cost, so step-time analyses leave them out."""

    # -- feeding ------------------------------------------------------------------
    def feed(self, data: OpsFields) -> None:
        """Fold one ``ops`` event's data (the event dict, ``k``/``ts`` included or not)."""
        if not isinstance(data, dict):
            return
        step = _int(data.get("step"))
        if not data.get("from_backward"):
            # the backward pass of a step whose sample was cut in its forward pass: with the
            # cut sample, about one step's ops (per-step figures divide by whole steps)
            self.sampled_steps += 1
        if data.get("truncated"):
            self.cut_steps += 1
        self.first_step = step if self.first_step is None else min(self.first_step, step)
        self.last_step = step if self.last_step is None else max(self.last_step, step)
        if len(self.sampled) < MAX_SAMPLED_KEPT:
            self.sampled.add(step)
        if isinstance(data.get("device_kind"), str):
            self.device_kind = data["device_kind"]
        if isinstance(data.get("model_device"), str):
            self.model_device = data["model_device"]
        self.host_s += _float(data.get("host_s"))
        if isinstance(data.get("overhead_s"), (int, float)):
            self.overhead_s += _float(data.get("overhead_s"))
            self.overhead_steps += 1
        if isinstance(data.get("interval"), int):
            self.interval = data["interval"]
        cost = data.get("cost_s")
        if isinstance(cost, (int, float)) and not isinstance(cost, bool):
            self.cost_s = max(self.cost_s or 0.0, float(cost))
        if isinstance(data.get("converged"), bool):
            self.converged = data["converged"]
        for item in _list(data.get("ops")):
            if isinstance(item, dict):
                self._feed_op(self.ops, item)
        for item in _list(data.get("mps_kernel")):
            if isinstance(item, dict):
                self._feed_op(self.mps_misses, item)
        seen_syncs: set[tuple[str, str, int, str]] = set()
        for item in _list(data.get("syncs")):
            if isinstance(item, dict):
                self._feed_sync(item, seen_syncs)
        f64 = data.get("float64")
        if isinstance(f64, dict):
            self.float64_calls += _int(f64.get("calls"))
            for site in _list(f64.get("sites")):
                if isinstance(site, dict):
                    self._feed_site(site)
        mixed = data.get("bf16_complex")
        if isinstance(mixed, dict):
            self.bfloat16_calls += _int(mixed.get("bfloat16"))
            self.complex_calls += _int(mixed.get("complex"))
        anomaly = data.get("anomaly")
        if isinstance(anomaly, dict):
            self._feed_anomaly(anomaly)
        for item in _list(data.get("mismatch")):
            if isinstance(item, dict) and len(self.mismatches) < 200:
                module = _str(item.get("module"))
                row = self.mismatches.setdefault(module, {
                    "module": module, "param_device": _str(item.get("param_device")),
                    "input_device": _str(item.get("input_device")), "steps": 0})  # fmt: skip
                row["steps"] += 1

    def _feed_anomaly(self, anomaly: dict[str, Any]) -> None:
        self.anomaly_steps += 1
        self.anomaly_check_nan = self.anomaly_check_nan or bool(anomaly.get("check_nan"))
        for site in _list(anomaly.get("sites")):
            if not isinstance(site, dict) or not isinstance(site.get("file"), str):
                continue
            row = {"file": site["file"], "line": _int(site.get("line")), "calls": _int(site.get("calls"))}
            for i, known in enumerate(self.anomaly_sites):
                if (known["file"], known["line"]) == (row["file"], row["line"]):
                    self.anomaly_sites[i] = row  # the probe's counts only grow
                    break
            else:
                if len(self.anomaly_sites) < 8:
                    self.anomaly_sites.append(row)

    def _slot(self, table: dict[Any, Any], key: Any, make: Any, spare: int = 0) -> Any:
        row = table.get(key)
        if row is None:
            if len(table) >= self.max_keys + spare:
                self.dropped += 1
                return None
            row = table[key] = make()
        return row

    def _feed_op(self, table: dict[tuple[str, str], OpRow], item: dict[str, Any]) -> None:
        op, module = _str(item.get("op")), _str(item.get("module"))
        if not op:
            return
        key = (op, module)
        if key not in table and len(table) >= self.max_keys:
            key = (op, OTHER)
        # past the cap, new modules of an op share one row per op (a few hundred ops exist)
        row = self._slot(table, key, lambda: OpRow(op, key[1]), spare=500)
        if row is None:
            return
        row.steps += 1
        row.calls += _int(item.get("calls"))
        row.host_s += _float(item.get("host_s"))
        if len(row.devices) < 8:
            row.devices.update(d for d in _list(item.get("devices"))[:8] if isinstance(d, str))
        if len(row.dtypes) < 8:
            row.dtypes.update(d for d in _list(item.get("dtypes"))[:8] if isinstance(d, str))
        if not row.file and _str(item.get("file")):
            row.file, row.line = _str(item.get("file"), 1000), _int(item.get("line"))

    def _feed_sync(self, item: dict[str, Any], seen: set[tuple[str, str, int, str]]) -> None:
        kind, file, line, module = (_str(item.get("kind")) or "sync", _str(item.get("file"), 1000),
                                    _int(item.get("line")), _str(item.get("module")))  # fmt: skip
        key = (kind, file, line, module)
        row = self._slot(self.syncs, key, lambda: SyncRow(kind, _str(item.get("op")), module, file, line))
        if row is None:
            return
        row.calls += _int(item.get("calls"))
        if key not in seen:
            seen.add(key)
            row.steps += 1
        row.predicted = row.predicted or bool(item.get("predicted"))
        row.code = row.code or _str(item.get("code"))
        via = item.get("via")
        if isinstance(via, dict):
            key_via = _via_key(via)
            if len(row.vias) < MAX_VIAS or key_via in row.vias:
                row.vias[key_via] = row.vias.get(key_via, 0) + _int(item.get("calls"))

    def _feed_site(self, item: dict[str, Any]) -> None:
        module, file, line = _str(item.get("module")), _str(item.get("file"), 1000), _int(item.get("line"))
        row = self._slot(self.float64_sites, (module, file, line), lambda: SiteRow(module, file, line))
        if row is None:
            return
        row.calls += _int(item.get("calls"))
        row.op = row.op or _str(item.get("op"))
        row.code = row.code or _str(item.get("code"))

    # -- queries --------------------------------------------------------------------
    def per_step(self, count: float) -> float:
        return count / self.sampled_steps if self.sampled_steps else 0.0

    def top_syncs(self, n: int = 10) -> list[SyncRow]:
        return sorted(self.syncs.values(), key=lambda r: (-r.calls, r.file, r.line))[:n]

    def top_float64(self, n: int = 5) -> list[SiteRow]:
        return sorted(self.float64_sites.values(), key=lambda r: -r.calls)[:n]

    def predicted_fallbacks(self, table: MpsKernelTable | None = None, device_kind: str | None = None) -> list[OpRow]:
        """Rows whose op has no MPS kernel (per the readiness table), among ops that ran on
        the training device: what would run on the CPU on a Mac. A CUDA run's CPU-side ops
        would stay on the CPU on a Mac too, so they are left out."""
        from ..kernels.readiness import CPU_FALLBACK, default_table

        table = table or default_table()
        device = (device_kind or self.device_kind or "cpu").split(":", 1)[0]
        status: dict[str, str] = {}
        out = []
        for row in self.ops.values():
            if row.op.startswith(_NOT_ATEN):
                continue
            if row.devices and not any(d.split(":", 1)[0] == device for d in row.devices):
                continue
            if row.op not in status:
                status[row.op] = table.status(row.op)
            if status[row.op] == CPU_FALLBACK:
                out.append(row)
        return out

    def overhead_share(self) -> float | None:
        """Extra time of sampled steps over their own time (how much sampling slowed them)."""
        if not self.overhead_steps or self.host_s <= 0:
            return None
        return self.overhead_s / self.host_s

    def cost_share(self, training_s: float) -> float | None:
        """What op accounting cost, as a share of the training time (all steps)."""
        if self.cost_s is None or training_s <= 0:
            return None
        return self.cost_s / training_s

    def to_dict(self, predict: bool = True) -> dict[str, Any]:
        """Plain JSON for reports (rows sorted by host time; per-step means included).
        ``mps_predicted``: ops of this run without an MPS kernel (``predict=False`` skips
        loading the kernel table)."""

        def op_row(r: OpRow) -> dict[str, Any]:
            return {"op": r.op, "module": r.module, "steps": r.steps, "calls": r.calls,
                    "calls_per_step": round(self.per_step(r.calls), 3),
                    "host_ms_per_step": round(self.per_step(r.host_s) * 1e3, 4),
                    "devices": sorted(r.devices), "dtypes": sorted(r.dtypes),
                    "file": r.file, "line": r.line}  # fmt: skip

        return {
            "sampled_steps": self.sampled_steps,
            "first_step": self.first_step,
            "last_step": self.last_step,
            "device_kind": self.device_kind,
            "model_device": self.model_device,
            "interval": self.interval,
            "overhead_share": self.overhead_share(),
            "cost_s": self.cost_s,
            "converged": self.converged,
            "ops": [op_row(r) for r in sorted(self.ops.values(), key=lambda r: -r.host_s)],
            "syncs": [{"kind": s.kind, "op": s.op, "module": s.module, "file": s.file, "line": s.line,
                       "code": s.code, "calls": s.calls, "calls_per_step": round(self.per_step(s.calls), 3),
                       "predicted": s.predicted, **_via_fields(s.via)} for s in self.top_syncs(100)],
            "float64": {"calls": self.float64_calls,
                        "per_step": round(self.per_step(self.float64_calls), 3),
                        "sites": [vars(s).copy() for s in self.top_float64(20)]},
            "bf16_complex": {"bfloat16": self.bfloat16_calls, "complex": self.complex_calls},
            "mismatch": list(self.mismatches.values()),
            "mps_kernel": [op_row(r) for r in sorted(self.mps_misses.values(), key=lambda r: -r.calls)],
            "mps_predicted": [{**op_row(r), "evidence": self._evidence(r.op)}
                              for r in sorted(self._predicted_or_none(predict), key=lambda r: -r.calls)],
            "dropped": self.dropped,
        }

    @staticmethod
    def _evidence(op: str) -> str:
        from ..kernels.readiness import default_table

        try:
            return default_table().explain(op)
        except Exception:
            return ""

    def _predicted_or_none(self, predict: bool) -> list[OpRow]:
        if not predict:
            return []
        try:
            return self.predicted_fallbacks()
        except Exception:  # a report must not fail over a missing torchgen
            return []
