"""Device backends: one interface for MPS, CUDA and CPU.

Every device-specific call of the probe and of ``doctor`` goes through a backend, so the
MPS-only paths (which cannot run on Linux) are a few small methods that a fake backend
replaces in tests with recorded numbers.
"""

from __future__ import annotations

from .base import DeviceBackend, MemoryFigures
from .select import backend_for, detect_backend

__all__ = ["DeviceBackend", "MemoryFigures", "backend_for", "detect_backend"]
