"""Memory and CPU samples: a bounded series plus exact peaks and first/last figures."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..events.payloads import MemFields
from .series import Series


@dataclass
class MemPoint:
    ts: float
    rss: int | None
    rss_children: int | None
    sys_available: int | None
    swap_used: int | None
    cpu_pct: float | None
    allocated: int | None
    cached: int | None
    workers: int | None = None
    cpu_main_s: float | None = None
    """Running totals (see probe/sampler.py): CPU seconds of the training process, of its
    child processes (DataLoader workers), and the seconds those children waited for a
    core; ``sys_busy`` is the share of the machine's CPUs busy since the last sample."""
    cpu_workers_s: float | None = None
    cpu_workers_startup_s: float | None = None
    runq_workers_s: float | None = None
    sys_busy: float | None = None
    sys_steal: float | None = None
    """Share of the machine's CPU time a hypervisor stole since the last sample (Linux)."""
    runq_main_s: float | None = None
    """Seconds the main (training) thread waited for a core so far (Linux)."""

    @property
    def rss_total(self) -> int | None:
        if self.rss is None:
            return None
        return self.rss + (self.rss_children or 0)


class MemoryStats:
    def __init__(self, capacity: int = 2048) -> None:
        self.series: Series[MemPoint] = Series(capacity)
        self.first: MemPoint | None = None
        self.peak: dict[str, int] = {}
        self.min_sys_available: int | None = None
        self.sys_total: int | None = None
        self.device_total: int | None = None
        self.device_limit: int | None = None
        self.device_peak: int | None = None
        self.samples = 0
        self.others: list[tuple[str, int, int]] = []
        """The largest other programs (name, pid, rss) read at the sample with the least memory
        available among those that read them (the probe reads them only while memory is short)."""
        self._others_available: int | None = None

    def feed(self, ts: float, data: MemFields) -> None:
        device = data.get("device")
        if not isinstance(device, dict):
            device = {}
        point = MemPoint(
            ts=ts,
            rss=_opt(data.get("rss")),
            rss_children=_opt(data.get("rss_children")),
            sys_available=_opt(data.get("sys_available")),
            swap_used=_opt(data.get("swap_used")),
            cpu_pct=_optf(data.get("cpu_pct")),
            allocated=_opt(device.get("allocated")),
            cached=_opt(device.get("cached")),
            workers=_opt(data.get("workers")),
            cpu_main_s=_optf(data.get("cpu_main_s")),
            cpu_workers_s=_optf(data.get("cpu_workers_s")),
            cpu_workers_startup_s=_optf(data.get("cpu_workers_startup_s")),
            runq_workers_s=_optf(data.get("runq_workers_s")),
            sys_busy=_optf(data.get("sys_busy")),
            sys_steal=_optf(data.get("sys_steal")),
            runq_main_s=_optf(data.get("runq_main_s")),
        )
        self.samples += 1
        if self.first is None:
            self.first = point
        self.series.append(point)
        for key in ("rss", "rss_children", "swap_used", "allocated", "cached"):
            value = getattr(point, key)
            if value is not None and value > self.peak.get(key, -1):
                self.peak[key] = value
        total = point.rss_total
        if total is not None and total > self.peak.get("rss_total", -1):
            self.peak["rss_total"] = total
        if point.sys_available is not None:
            if self.min_sys_available is None or point.sys_available < self.min_sys_available:
                self.min_sys_available = point.sys_available
        self.sys_total = _opt(data.get("sys_total")) or self.sys_total
        others = data.get("others")
        if isinstance(others, list) and point.sys_available is not None and (
                self._others_available is None or point.sys_available < self._others_available):
            read = _others(others)
            if read:
                self.others, self._others_available = read, point.sys_available
        if device:
            self.device_total = _opt(device.get("total")) or self.device_total
            self.device_limit = _opt(device.get("limit")) or self.device_limit
            peak = _opt(device.get("peak"))
            if peak is not None:
                self.device_peak = max(peak, self.device_peak or 0)

    @property
    def last(self) -> MemPoint | None:
        return self.series.last

    @property
    def peak_allocated(self) -> int | None:
        """Peak tensor memory on the device: the allocator's own peak where the device
        keeps one (CUDA), else the highest sampled reading (MPS)."""
        return self.device_peak or self.peak.get("allocated")


def _others(rows: list[Any]) -> list[tuple[str, int, int]]:
    """``[[name, pid, rss], ...]`` as the probe sends it; malformed rows are left out."""
    out = []
    for row in rows[:10]:
        if isinstance(row, list) and len(row) == 3:
            pid, rss = _opt(row[1]), _opt(row[2])
            if pid is not None and rss is not None and rss >= 0:
                out.append((str(row[0])[:64], pid, rss))
    return out


def _opt(v: Any) -> int | None:
    if v is None or isinstance(v, bool):
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _optf(v: Any) -> float | None:
    if v is None or isinstance(v, bool):
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None
