"""Choosing the backend for the device the training actually uses."""

from __future__ import annotations

from .base import DeviceBackend
from .cpu import CpuBackend
from .kinds import KINDS, available, make_backend


def backend_for(device_type: str, index: int | None = None) -> DeviceBackend:
    """The backend for a ``torch.device.type`` (a kind of :data:`.kinds.KINDS`; anything else -> CPU)."""
    backend: DeviceBackend = make_backend(device_type, index)
    return backend


def accelerator_kind() -> str | None:
    """The first available accelerator in registry order (MPS first on a Mac, CUDA elsewhere), else None."""
    try:
        import torch

        for entry in KINDS:
            if entry.asynchronous and available(entry, torch):
                return entry.name
    except Exception:
        pass
    return None


def detect_backend() -> DeviceBackend:
    """The accelerator this process would most likely train on, before any model is seen.

    The probe switches to the device of the model's parameters once an optimizer steps.
    """
    kind = accelerator_kind()
    if kind is not None:
        try:
            return backend_for(kind)
        except Exception:
            pass
    return CpuBackend()
