"""Device backends: one interface for MPS, CUDA and CPU, and the registry of device kinds.

Every device-specific call of the probe and of ``doctor`` goes through a backend, so the
MPS-only paths (which cannot run on Linux) are a few small methods that a fake backend
replaces in tests with recorded numbers.
"""

from __future__ import annotations

from .base import DeviceBackend, MemoryFigures
from .kinds import DEVICE_KINDS, KINDS, DeviceKind
from .select import backend_for, detect_backend

__all__ = ["DEVICE_KINDS", "KINDS", "DeviceBackend", "DeviceKind", "MemoryFigures", "backend_for", "detect_backend"]
