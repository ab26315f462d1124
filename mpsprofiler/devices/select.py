"""Choosing the backend for the device the training actually uses."""

from __future__ import annotations

from .base import DeviceBackend
from .cpu import CpuBackend


def backend_for(device_type: str, index: int | None = None) -> DeviceBackend:
    """The backend for a ``torch.device.type`` ('mps', 'cuda', anything else -> CPU)."""
    if device_type == "cuda":
        from .cuda import CudaBackend

        return CudaBackend(index)
    if device_type == "mps":
        from .mps import MpsBackend

        return MpsBackend()
    return CpuBackend()


def accelerator_kind() -> str | None:
    """``"mps"``, else ``"cuda"``, else None: MPS first on a Mac, CUDA elsewhere."""
    try:
        import torch

        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return "mps"
        if torch.cuda.is_available():
            return "cuda"
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
