"""Pageable-copy facts: a DataLoader on CUDA yields batches outside pinned memory.

From the probe's ``health`` events of kind ``copies`` (see :mod:`mpsprofiler.probe.copies`):
the first batches of each loader, their bytes and whether they were pinned, and the
loader's own ``pin_memory`` (None where the probe could not read one). The loader with
the most pageable bytes per batch is the one named. The probe numbers it by first iteration
(its record's ``id``); ``pageable_loader`` is its construction number, which ``--set
dataloader.N`` addresses, and ``pageable_loader_name`` the number the user counts it by
(a framework's copy of the script's loader is not another one: ``loader_place.user_label``).

Copy time, where it was measured (``copy_time`` events: the host-to-device copies of the
op-sampled steps on CUDA, timed with device events around each): ``copy_ms_per_step``,
the median over those steps of their copies' summed device time, and ``copy_gb_per_s``,
their bytes over that time (all timed steps together). Absent where nothing was timed
(MPS, CPU, ``--no-ops``, or no copy on a sampled step); then ``copy_time_missing`` says
so (``not_measured``, a code the rule file words).
"""

from __future__ import annotations

from typing import Any

from ...session.session import Session
from .common import MIB, rounded
from .loader_place import user_label
from .registry import analyzer

COPIES_FACTS: tuple[str, ...] = (
    "pageable_loader", "pageable_loader_name", "pageable_share", "pageable_mib_per_batch", "pageable_batches_checked",
    "pageable_loader_pin_memory", "copy_ms_per_step", "copy_gb_per_s", "copy_steps_timed", "copy_time_missing",
)


@analyzer("copies", provides=COPIES_FACTS)
def copies_facts(session: Session) -> dict[str, Any]:
    facts = _pageable(session)
    timed = _copy_time(session)
    facts.update(timed)
    if facts and not timed:
        facts["copy_time_missing"] = "not_measured"  # a code: rules/pageable-copies.yaml words it
    return facts


def _copy_time(session: Session) -> dict[str, Any]:
    timed = [s for s in session.health.copy_time if s.ms > 0 and s.bytes > 0]
    if not timed:
        return {}
    per_step = sorted(s.ms for s in timed)
    seconds = sum(s.ms for s in timed) / 1000.0
    return {
        "copy_ms_per_step": rounded(per_step[len(per_step) // 2], 4),
        "copy_gb_per_s": rounded(sum(s.bytes for s in timed) / seconds / 1e9, 3),
        "copy_steps_timed": len(timed),
    }


def _pageable(session: Session) -> dict[str, Any]:
    best: tuple[int, int, dict[str, Any]] | None = None
    for number, row in session.health.copies.items():
        batches = row.get("batches")
        if not isinstance(batches, int) or batches <= 0:
            continue
        per = row.get("bytes_per_batch")
        pinned = row.get("pinned_bytes_per_batch")
        pageable_bytes = (per if isinstance(per, int) else 0) - (pinned if isinstance(pinned, int) else 0)
        if best is None or pageable_bytes > best[0]:
            best = (pageable_bytes, number, row)
    if best is None:
        return {}
    pageable_bytes, number, row = best
    pin = row.get("pin_memory")
    record = session.dataloaders.get(number)
    created = record.get("created") if record is not None else None
    return {
        "pageable_loader": created if isinstance(created, int) and not isinstance(created, bool) else number,
        "pageable_loader_name": user_label(session, record) if record is not None else f"DataLoader {number}",
        "pageable_share": rounded(int(row.get("pageable_batches") or 0) / int(row["batches"]), 4),
        "pageable_mib_per_batch": rounded(max(0, pageable_bytes) / MIB, 3),
        "pageable_batches_checked": int(row["batches"]),
        "pageable_loader_pin_memory": pin if isinstance(pin, bool) else None,
    }
