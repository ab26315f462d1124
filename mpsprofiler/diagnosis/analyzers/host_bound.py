"""Host-bound facts: the device idles most of the step while Python launches work.

Device busy time comes from the probe's timed steps (``health`` events, see
:mod:`mpsprofiler.probe.device_time`: the step's work queued behind a hold, so its
device time has no host gaps in it); the step time, ``host_bound_step_ms``, is the median
of the steady steps neither op-sampled nor timed, and the share and the evidence's "X ms
of a Y ms step" both use it. Op counts and the syncs' lines come from op accounting
(sampled steps). HTA calls a kernel "short" when its GPU time is below its launch time:
here the mean device time per op, busy time over ops per step, against the host time per
op (the rest of the step).

The memory a larger batch would take is read from the run's own figures: tensors held
between steps (parameters, gradients, optimizer state: the allocated memory at step
ends) do not grow with the batch; the rest of the peak (activations) does, about
linearly.

The fix's texts are the rule's (rules/host-bound.yaml): facts here only say which parts
apply (``host_bound_compile`` names the device for its phrase, ``host_bound_try_cpu`` is
set on MPS only, ``larger_batch_size`` only where a DataLoader with a batch size feeds
the steps, the sync facts only where op accounting saw a sync).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from ...devices.mps_rules import compiles_for_mps
from ...session.session import Session
from .common import MIB, rounded, training_loader
from .registry import analyzer

HOST_BOUND_FACTS: tuple[str, ...] = (
    "device_busy_ms", "device_busy_share", "device_timed_steps", "device_timing_dropped", "device_timing_off",
    "device_timing_cost_share",
    "host_bound_step_ms", "ops_per_step", "device_us_per_op", "host_us_per_op", "larger_batch_factor",
    "larger_batch_peak_mib", "larger_batch_size", "device_memory_limit_mib", "host_bound_syncs",
    "host_bound_sync_at", "host_bound_sync_code", "host_bound_compile", "host_bound_compile_line",
    "host_bound_try_cpu", "model_parameters",
)
MEMORY_HEADROOM = 0.8
"""A larger batch may use at most 80% of the device's limit (fragmentation, spikes)."""
MAX_FACTOR = 8


@analyzer("host_bound", provides=HOST_BOUND_FACTS)
def host_bound_facts(session: Session) -> dict[str, Any]:
    h = session.health
    facts: dict[str, Any] = {"device_timed_steps": len(h.device), "device_timing_dropped": h.device_invalid,
                             "device_timing_off": h.device_timing,
                             "device_timing_cost_share": rounded(h.device_cost_share, 5)}
    busy_ms = h.busy_ms()
    if busy_ms is None:
        return facts
    # one median for the finding's share and its "X ms of a Y ms step": the steady steps
    # neither op-sampled (a slow host) nor timed (a hold); ``step_ms`` and the Overview
    # take all steady steps (steps.quantile), so they may differ a little
    steps = session.steps
    sampled = session.ops.sampled | {s.step for s in h.device}
    own = sorted(p.dur for p in steps.steady if p.i not in sampled)
    step_ms = own[len(own) // 2] * 1000.0 if own else None
    facts["device_busy_ms"] = rounded(busy_ms, 4)
    if not step_ms:
        return facts
    facts["host_bound_step_ms"] = rounded(step_ms, 4)
    share = min(1.0, busy_ms / step_ms)
    facts["device_busy_share"] = rounded(share, 4)
    ops = session.ops
    if ops.sampled_steps:
        per_step = sum(r.calls for r in ops.ops.values()) / ops.sampled_steps
        facts["ops_per_step"] = rounded(per_step, 1)
        if per_step > 0:
            facts["device_us_per_op"] = rounded(busy_ms * 1000.0 / per_step, 2)
            facts["host_us_per_op"] = rounded(step_ms * 1000.0 / per_step, 2)
    params = session.model.get("parameters")
    facts["model_parameters"] = params if isinstance(params, int) else None
    facts.update(_larger_batch(session, share))
    facts.update(_syncs(session))
    kind = session.device_kind
    # names the rule's phrases stand for (rules/host-bound.yaml): the texts live there; on
    # MPS torch.compile fails before 2.8 (mps_rules "torch.compile on MPS"), so no advice there
    compiles = kind == "cuda" or (kind == "mps" and _compiles_for_mps(session.env))
    facts["host_bound_compile"] = facts["host_bound_compile_line"] = kind if compiles else None
    facts["host_bound_try_cpu"] = "mps" if kind == "mps" else None
    return facts


def _compiles_for_mps(env: Mapping[str, Any]) -> bool:
    """torch 2.8+ (MPSInductor), and macOS 14+ where the run knows the macOS."""
    version = re.match(r"(\d+)\.(\d+)", str(env.get("torch") or ""))
    if version is None or not compiles_for_mps((int(version.group(1)), int(version.group(2)))):
        return False
    macos = re.match(r"(\d+)", str(env.get("macos_version") or ""))
    return macos is None or int(macos.group(1)) >= 14


def _larger_batch(session: Session, share: float) -> dict[str, Any]:
    """How many times the batch the device has time for, the peak memory it would take,
    and the training loader's batch size times that (where the run has a loader)."""
    out: dict[str, Any] = {}
    if share <= 0:
        return out
    fits = min(MAX_FACTOR, 2 ** int(math.log2(max(1.0, 0.8 / share))))
    mem = session.memory
    peak = mem.peak_allocated
    held = [p.alloc for p in session.steps.steady if p.alloc]
    limit = mem.device_limit or mem.device_total
    if limit:
        out["device_memory_limit_mib"] = round(limit / MIB, 1)
    if peak and held:
        between = sorted(held)[len(held) // 2]
        activations = max(0, peak - between)
        while fits > 1 and limit and between + fits * activations > MEMORY_HEADROOM * limit:
            fits //= 2
        if fits > 1:
            out["larger_batch_peak_mib"] = round((between + fits * activations) / MIB, 1)
    if fits < 2:
        return out  # no room for a larger batch: the rule says nothing of one
    out["larger_batch_factor"] = fits
    loader = training_loader(session)
    batch = loader.get("batch_size") if loader else None
    if isinstance(batch, int) and not isinstance(batch, bool) and batch > 0:
        out["larger_batch_size"] = batch * fits
    return out


def _syncs(session: Session) -> dict[str, Any]:
    """The sampled steps' host-device syncs, most frequent first (None: none seen, or no
    op accounting); the first one's place and code, for the fix's snippet."""
    syncs = session.ops.top_syncs(3)
    if not syncs:
        return {"host_bound_syncs": None}
    per = session.ops.per_step
    out: dict[str, Any] = {"host_bound_syncs": "; ".join(
        f"{s.file.rsplit('/', 1)[-1]}:{s.line} `{s.code or s.op}` ({per(s.calls):.0f} per step)" for s in syncs)}
    top = syncs[0]
    if top.code and top.file:
        out["host_bound_sync_at"] = f"{top.file.rsplit('/', 1)[-1]}:{top.line}"
        out["host_bound_sync_code"] = top.code.strip()
    return out
