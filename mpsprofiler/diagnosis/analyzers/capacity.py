"""Headroom facts: how close the run came to the device limit and to the machine's memory,
what one sample costs, and the largest batch size that fits.

The batch-size estimate splits peak memory into a fixed part (parameters, gradients and
optimizer state, from the parameter count) and a per-sample part (activations), then
takes the largest power of two (what GPU kernels tile best) that stays 10% under the limit.
On the CPU the process RSS and the machine's memory play the device's roles.
"""

from __future__ import annotations

from typing import Any

from ...devices import kinds as device_kinds
from ...session.session import Session
from .common import is_asynchronous, num, training_loader
from .registry import analyzer

MARGIN = 0.9
"""Keep 10% free: allocator fragmentation and other apps need room (unified memory)."""
MAX_BATCH = 1 << 16
DTYPE_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int8": 1}
OPTIMIZER_STATES = {"SGD": 1, "Adagrad": 1, "RMSprop": 1, "Adadelta": 2, "Adam": 2, "AdamW": 2,
                    "NAdam": 2, "RAdam": 2, "Adamax": 2, "SparseAdam": 2}  # fmt: skip
"""State tensors per parameter; SGD counts its momentum buffer (worst case)."""


CAPACITY_FACTS: tuple[str, ...] = (
    "device_label", "device_limit", "device_limit_gib", "device_peak", "device_peak_gib",
    "device_peak_share", "device_total", "max_batch_size_fits", "memory_per_sample", "memory_per_sample_mib",
    "memory_pressure", "memory_total", "memory_total_gib", "model_state_bytes", "suggested_batch_size",
)
"""Every fact the ``capacity`` analyzer may return (declared: no other analyzer may provide one)."""


@analyzer("capacity", provides=CAPACITY_FACTS)
def capacity_facts(session: Session) -> dict[str, Any]:
    mem = session.memory
    device = is_asynchronous(session)
    facts: dict[str, Any] = {}
    peak_alloc = _max(mem.peak.get("allocated"), mem.device_peak, *(p.alloc for p in session.steps.early))
    device_peak = _max(mem.peak.get("cached"), peak_alloc)
    facts["device_label"] = device_kinds.label(session.device_kind)
    facts["device_limit"] = mem.device_limit
    facts["device_total"] = mem.device_total
    facts["device_peak"] = device_peak
    if device_peak is not None and mem.device_limit:
        facts["device_peak_share"] = round(device_peak / mem.device_limit, 4)
    facts["device_peak_gib"] = _gib(device_peak)
    facts["device_limit_gib"] = _gib(mem.device_limit)
    total = num(session.env.get("memory_total")) or num(mem.sys_total)
    facts["memory_total"] = int(total) if total else None
    facts["memory_total_gib"] = _gib(total)
    rss_peak = mem.peak.get("rss_total")
    if total and rss_peak is not None:
        used = rss_peak + ((mem.peak.get("cached") or 0) if session.device_kind == "mps" else 0)
        facts["memory_pressure"] = round(used / total, 4)
    loader = training_loader(session)
    batch = int(num(loader.get("batch_size")) or 0) if loader else 0
    fixed = _fixed_bytes(session)
    if device:
        per, fits = _fit(peak_alloc, 0, fixed, batch, mem.device_limit or mem.device_total)
    else:
        base = mem.first.rss if mem.first is not None else None
        per, fits = _fit(mem.peak.get("rss"), base, fixed, batch, _host_capacity(session))
    facts["model_state_bytes"] = fixed
    facts["memory_per_sample"] = per
    facts["memory_per_sample_mib"] = round(per / 2**20, 2) if per is not None else None
    facts["max_batch_size_fits"] = fits
    facts["suggested_batch_size"] = _suggest(batch, fits)
    return facts


def _fixed_bytes(session: Session) -> int | None:
    """Parameters + gradients + optimizer state, in bytes."""
    params = num(session.model.get("parameters"))
    if not params:
        return None
    dtypes = session.model.get("dtypes") or ["float32"]
    size = max(DTYPE_BYTES.get(str(d), 4) for d in dtypes)
    states = OPTIMIZER_STATES.get(str(session.model.get("optimizer")), 2)
    return int(params * size * (2 + states))


def _fit(
    peak: int | None, base: int | None, fixed: int | None, batch: int, capacity: int | None
) -> tuple[int | None, int | None]:
    """(bytes per sample, largest power-of-two batch that fits), None where unknown."""
    if peak is None or not batch or not capacity:
        return None, None
    start = (base or 0) + (fixed or 0)
    per = (peak - start) / batch
    if per <= 0:
        return None, None
    room = MARGIN * capacity - start
    if room < per:
        return int(per), 0
    size = 1
    while size * 2 <= MAX_BATCH and size * 2 * per <= room:
        size *= 2
    return int(per), size


def _host_capacity(session: Session) -> int | None:
    """What the process could have reached: its memory plus what the machine had free,
    at the tightest moment of the run."""
    best = None
    for m in session.memory.series.points():
        if m.rss is None or m.sys_available is None:
            continue
        room = m.rss + m.sys_available
        best = room if best is None else min(best, room)
    return best


def _suggest(batch: int, fits: int | None) -> int | None:
    """Half the batch (a power of two), or the largest that fits when that is smaller."""
    if not batch:
        return None
    half = 1
    while half * 2 <= batch // 2:
        half *= 2
    if fits is not None and 0 < fits < half:
        return fits
    return half


def _gib(v: float | None) -> float | None:
    return round(v / 2**30, 2) if v else None


def _max(*values: Any) -> int | None:
    nums = [int(v) for v in values if v is not None]
    return max(nums) if nums else None
