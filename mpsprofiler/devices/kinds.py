"""The one registry of device kinds: name, label, whether it runs asynchronously, its backend.

The rule loader (valid ``devices:``), the rule engine (which rules apply), ``mpsprof rules``
(``--device`` choices, listings), the analyzers (accelerator or not, the device's label), the
backend selection and accelerator detection all read :data:`KINDS` instead of spelling
``("mps", "cuda", "cpu")``. A new device kind is one :class:`DeviceKind` line here plus its
backend module in this package. Standard library only: the probe imports it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload

if TYPE_CHECKING:
    from .base import DeviceBackend


@dataclass(frozen=True)
class DeviceKind:
    """``name`` is ``torch.device.type``; ``backend`` is ``module:Class`` in this package,
    imported on first use; ``indexed`` backends take the device index; ``available`` is the
    dotted path below ``torch`` of the function that says the device is usable (empty: always,
    the CPU). Accelerators are detected in registry order (MPS first on a Mac)."""

    name: str
    label: str
    asynchronous: bool
    backend: str
    indexed: bool = False
    available: str = ""


KINDS: tuple[DeviceKind, ...] = (
    DeviceKind("mps", "MPS", True, "mps:MpsBackend", available="backends.mps.is_available"),
    DeviceKind("cuda", "CUDA", True, "cuda:CudaBackend", indexed=True, available="cuda.is_available"),
    DeviceKind("cpu", "CPU", False, "cpu:CpuBackend"),
)
DEVICE_KINDS: tuple[str, ...] = tuple(k.name for k in KINDS)
"""Every kind's name, in registry order (what rules' ``devices:`` may say)."""
_BY_NAME = {k.name: k for k in KINDS}
FALLBACK = "cpu"
"""The kind anything unknown is treated as."""


def kind(name: str | None) -> DeviceKind:
    """The registry entry of ``name`` (``"mps:0"`` and ``"CUDA"`` work); unknown -> the CPU's."""
    return _BY_NAME.get(normalize_device(name) or FALLBACK, _BY_NAME[FALLBACK])


@overload
def normalize_device(device_kind: str) -> str: ...
@overload
def normalize_device(device_kind: None) -> None: ...
def normalize_device(device_kind: str | None) -> str | None:
    """``"mps:0"`` / ``"CUDA"`` -> ``"mps"`` / ``"cuda"``; None stays None (every device)."""
    if device_kind is None:
        return None
    return str(device_kind).split(":", 1)[0].strip().lower()


def is_asynchronous(name: str | None) -> bool:
    """True for a known accelerator (kernels run after the call returns)."""
    entry = _BY_NAME.get(normalize_device(name) or "")
    return entry is not None and entry.asynchronous


def label(name: str | None) -> str:
    """``MPS`` / ``CUDA`` / ``CPU``: how the device is named in findings."""
    return kind(name).label


def make_backend(name: str, index: int | None = None) -> DeviceBackend:
    """A backend instance for a ``torch.device.type`` (anything unknown -> the CPU's)."""
    entry = _BY_NAME.get(name, _BY_NAME[FALLBACK])
    module, cls = entry.backend.split(":")
    backend_cls = getattr(importlib.import_module(f"{__package__}.{module}"), cls)
    backend: DeviceBackend = backend_cls(index) if entry.indexed else backend_cls()
    return backend


def available(entry: DeviceKind, torch: Any) -> bool:
    """Whether ``torch`` can use this kind now (always, for the CPU)."""
    if not entry.available:
        return True
    target: Any = torch
    for part in entry.available.split("."):
        target = getattr(target, part, None)
        if target is None:
            return False
    return bool(target())
