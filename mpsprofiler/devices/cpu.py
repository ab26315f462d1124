"""The CPU backend: synchronous, no device memory (process RSS is measured elsewhere)."""

from __future__ import annotations

from .base import DeviceBackend


class CpuBackend(DeviceBackend):
    kind = "cpu"
    asynchronous = False
