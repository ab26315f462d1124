"""Environment facts: can this machine train on MPS at all, and how is torch set up.

Read from the ``env`` event the probe sends at start (versions, chip, ``PYTORCH_*``
variables) plus the DataLoader and warnings seen, so a run can say *why* MPS was not
used (macOS version, Rosetta, the build) and which settings do nothing on MPS.
"""

from __future__ import annotations

import math
import re
import shlex
from typing import Any

from ...devices.mps import DEFAULT_HIGH_WATERMARK_UNIFIED, high_watermark_ratio
from ...devices.mps_rules import (
    FALLBACK,
    HIGH,
    HIGH_WATERMARK_UPPER_BOUND,
    LOW,
    fallback_aborts,
    fallback_enabled,
    mps_autocast,
    paired_low,
    upgrade_command,
    validate_env,
    watermark_fix,
)
from ...environment import mps_min_macos_for
from ...session.session import Session
from .registry import analyzer

PIN_MEMORY_WARNING = "'pin_memory' argument is set as true but not supported on MPS now"
SAFER_WATERMARK = 1.0
"""1.0 x recommendedMaxWorkingSetSize: the allocator stops at what macOS recommends for
the GPU, so a too-large job gets a clean out-of-memory error instead of swapping."""
CAP_HEADROOM = 1.1
"""A suggested cap leaves the run's own peak 10% room (as capacity.py's MARGIN): the
allocator compares the driver's allocated size with high x recommended max
(MPSAllocator.mm ``alloc_buffer``), so a cap under what this run held stops it."""


def mps_min_macos(torch_version: str | None) -> str | None:
    """The oldest macOS a torch release runs MPS on (:func:`~mpsprofiler.environment.mps_min_macos_for`:
    ``MPSDevice::MPSDevice`` in aten/src/ATen/mps/MPSDevice.mm)."""
    m = re.match(r"(\d+)\.(\d+)", torch_version or "")
    if not m:
        return None
    major, minor = mps_min_macos_for((int(m.group(1)), int(m.group(2))))
    return f"{major}.{minor}"


def _version_tuple(text: str | None) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text or "")[:3])


ENVIRONMENT_FACTS: tuple[str, ...] = (
    "apple_silicon", "cuda_available", "default_watermark_ratio", "fallback_env_set",
    "fp16_autocast_device", "intel_mac",
    "is_macos", "mac_fallback_invalid", "mac_watermark_error", "mac_watermark_fix", "mac_watermark_fix_high",
    "mac_watermark_fix_low", "mac_watermark_set", "machine",
    "macos_too_old", "macos_version", "mps_available", "mps_built", "mps_min_macos",
    "mps_autocast", "mps_autocast_code", "mps_unavailable_cause", "mps_upgrade_command", "pin_memory_on_mps", "python_version", "rosetta", "run_command",
    "suggested_low_watermark_ratio",
    "suggested_watermark_ratio",
    "torch_version", "watermark_cap", "watermark_floor_ratio", "watermark_peak_ratio", "watermark_ratio",
    "watermark_ratio_set", "watermark_unlimited",
)
"""Every fact the ``environment`` analyzer may return (declared: no other analyzer may provide one)."""


@analyzer("environment", provides=ENVIRONMENT_FACTS)
def environment_facts(session: Session) -> dict[str, Any]:
    env = session.env
    is_macos = env.get("platform") == "darwin" if env.get("platform") else None
    apple = bool(env.get("apple_silicon"))
    rosetta = bool(env.get("rosetta"))
    torch_version = env.get("torch")
    macos = env.get("macos_version")
    needed = mps_min_macos(torch_version)
    pyenv = env.get("pytorch_env")
    if not isinstance(pyenv, dict):
        pyenv = {}
    facts: dict[str, Any] = {
        "is_macos": is_macos,
        "macos_version": macos,
        "apple_silicon": apple,
        "rosetta": rosetta,
        "intel_mac": bool(is_macos) and not apple,
        "mps_built": env.get("mps_built"),
        "mps_available": env.get("mps_available"),
        "cuda_available": env.get("cuda_available"),
        "torch_version": torch_version,
        "python_version": env.get("python"),
        "machine": env.get("machine"),
        "mps_min_macos": needed,
        "macos_too_old": bool(macos and needed and _version_tuple(macos) < _version_tuple(needed)),
        "fallback_env_set": fallback_enabled(pyenv.get("PYTORCH_ENABLE_MPS_FALLBACK")),
    }
    facts["mps_unavailable_cause"] = _why_no_mps(facts)
    facts.update(_autocast(torch_version, session.device_kind))
    macos_t = _version_tuple(macos) + (0,)
    facts["mps_upgrade_command"] = upgrade_command((macos_t[0], macos_t[1]) if len(macos_t) > 1 and is_macos
                                                   else None)
    facts.update(_refused_on_a_mac(pyenv))
    facts.update(_watermark(pyenv, _peak_ratio(session)))
    facts["pin_memory_on_mps"] = _pin_memory_on_mps(session)
    facts["run_command"] = run_command(session)
    return facts


def run_command(session: Session) -> str:
    """The script's command as this run ran it (``python scripts/t16.py --epochs 2``, the
    module form ``python -m pkg.train ...``), shell-quoted: where a fix puts an environment
    variable in front of the command, it is the user's command, not a made-up ``train.py``."""
    from .source_edit import short_path

    run = session.run
    argv = [str(a) for a in run.get("argv") or []]
    if not argv:
        return "python train.py"
    if run.get("module"):
        head = ["python", "-m", str(run.get("target") or argv[0])]
    else:
        head = ["python", short_path(argv[0], run.get("cwd"))]
    return shlex.join(head + argv[1:])


def _autocast(torch_version: str | None, device_kind: str | None) -> dict[str, Any]:
    """Which autocast a fix may write (:func:`~mpsprofiler.devices.mps_rules.mps_autocast`):
    ``torch.autocast(device_type="mps")`` raises RuntimeError before torch 2.5, so the MPS
    fixes write it only for a torch known to take it; CUDA has had float16 autocast in every
    supported release. None (the line is left out) where the torch version is unknown."""
    m = re.match(r"(\d+)\.(\d+)", torch_version or "")
    mps = mps_autocast((int(m.group(1)), int(m.group(2)))) if m else "unknown"
    takes_fp16 = mps in ("fp16", "fp16_bf16")
    kind = (device_kind or "").split(":")[0]
    device = "cuda" if kind == "cuda" else ("mps" if kind == "mps" and takes_fp16 else None)
    return {"mps_autocast": mps, "mps_autocast_code": "fp16" if takes_fp16 else None,
            "fp16_autocast_device": device}


MPS_UNAVAILABLE_CAUSES = ("rosetta", "intel_mac", "not_built", "macos_too_old", "no_device")
"""Why a Mac has no MPS, as a name: the rule files say it in words (``phrases:``)."""


def _refused_on_a_mac(pyenv: dict[str, Any]) -> dict[str, Any]:
    """MPS variables of this run's environment that torch on a Mac would refuse: the
    watermark pair (``RuntimeError`` at the first MPS allocation, :func:`validate_env`) and
    a fallback switch ``std::stoi`` cannot read (``import torch`` aborts). A run elsewhere
    never reads them, so the run went fine, and the same shell on a Mac would not."""
    env = {k: str(v) for k, v in pyenv.items() if k in (HIGH, LOW, FALLBACK)}
    error = validate_env(env) if HIGH in env or LOW in env else None
    pair = watermark_fix(env) if error else None
    fallback = env.get(FALLBACK)
    return {
        "mac_watermark_error": error,
        "mac_watermark_set": " ".join(f"{k}={env[k]}" for k in (HIGH, LOW) if k in env) or None,
        "mac_watermark_fix": " ".join(f"{k}={v}" for k, v in pair.items()) if pair else None,
        "mac_watermark_fix_high": pair[HIGH] if pair else None,
        "mac_watermark_fix_low": pair[LOW] if pair else None,
        "mac_fallback_invalid": fallback if fallback_aborts(fallback) else None,
    }


def _why_no_mps(f: dict[str, Any]) -> str | None:
    if not f["is_macos"] or f["mps_available"]:
        return None
    if f["rosetta"]:
        return "rosetta"
    if not f["apple_silicon"]:
        return "intel_mac"
    if f["mps_built"] is False:
        return "not_built"
    if f["macos_too_old"]:
        return "macos_too_old"
    return "no_device"


def _peak_ratio(session: Session) -> float | None:
    """The run's peak MPS driver memory over the recommended maximum (the base of both
    watermark limits); None off MPS or where either was not read (torch before 2.5 has
    no ``recommended_max_memory``)."""
    if session.device_kind != "mps":
        return None
    mem = session.memory
    peak, total = mem.peak.get("cached"), mem.device_total
    if not peak or not total:
        return None
    return peak / total


def _watermark(pyenv: dict[str, str], peak_ratio: float | None = None) -> dict[str, Any]:
    """The cap to suggest: 1.0, or 0.2 under a lower ratio already set, never under this
    run's own peak plus 10% (``CAP_HEADROOM``) and never at or above the ratio in force.
    ``watermark_cap`` says ``tight`` where no such cap exists: the run needs all it had."""
    raw = pyenv.get("PYTORCH_MPS_HIGH_WATERMARK_RATIO")
    ratio = high_watermark_ratio({"PYTORCH_MPS_HIGH_WATERMARK_RATIO": str(raw)} if raw is not None else {})
    current = 0.0 if ratio is None else ratio
    base = SAFER_WATERMARK if (ratio is None or ratio > SAFER_WATERMARK) else round(current - 0.2, 2)
    floor = None if peak_ratio is None else math.ceil(peak_ratio * CAP_HEADROOM * 20) / 20  # up to 0.05
    cap = max(base, floor) if floor is not None else base
    fits = cap <= HIGH_WATERMARK_UPPER_BOUND and (ratio is None or cap < ratio)
    # without a peak to size it by, never a cap under 0.5 blind
    suggested = cap if fits and (floor is not None or cap >= 0.5) else None
    return {
        "watermark_ratio": current,
        "watermark_ratio_set": raw is not None,
        "watermark_unlimited": ratio is None,
        "default_watermark_ratio": DEFAULT_HIGH_WATERMARK_UNIFIED,
        "watermark_peak_ratio": None if peak_ratio is None else round(peak_ratio, 2),
        "watermark_floor_ratio": floor,
        "watermark_cap": "cap" if suggested is not None else "tight",
        "suggested_watermark_ratio": suggested,
        # always with its low ratio: torch refuses a low ratio above the high one
        # (setLowWatermarkRatio in MPSAllocator.mm), and the unified default low is 1.4
        "suggested_low_watermark_ratio": None if suggested is None else paired_low(suggested),
    }


def _pin_memory_on_mps(session: Session) -> bool:
    for _category, message in session.warnings:
        if PIN_MEMORY_WARNING in message:
            return True
    if session.device_kind != "mps":
        return False
    return any(d.get("pin_memory") for d in session.dataloaders.values())
