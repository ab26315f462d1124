"""MPS backend (Apple silicon), on the documented ``torch.mps`` API only.

This code cannot run on Linux; tests drive the same logic through
:class:`~mpsprofiler.devices.fake.FakeMpsBackend`, which subclasses this one and
replaces only the calls into ``torch.mps``.
"""

from __future__ import annotations

import os
from typing import Any

from .base import DeviceBackend, MemoryFigures
from .mps_rules import DEFAULT_HIGH_WATERMARK_UNIFIED, effective_limit, strtod

__all__ = ["DEFAULT_HIGH_WATERMARK_UNIFIED", "MpsBackend", "high_watermark_ratio"]


def high_watermark_ratio(environ: dict[str, str] | None = None) -> float | None:
    """The ratio the MPS allocator runs with; None when it is 0.0 (no limit).

    torch parses the variable with C's ``strtod`` (``init_allocator``): text that is not a
    number reads as 0.0, i.e. no limit, and ``1.5x`` reads as 1.5. Mirror that (``doctor``
    flags the invalid value itself).
    """
    env = os.environ if environ is None else environ
    raw = env.get("PYTORCH_MPS_HIGH_WATERMARK_RATIO")
    if raw is None:
        return DEFAULT_HIGH_WATERMARK_UNIFIED
    value = strtod(raw)
    if value == 0.0:
        return None
    return value


class MpsBackend(DeviceBackend):
    kind = "mps"
    asynchronous = True

    def __init__(self) -> None:
        import torch

        self._torch = torch

    # The four calls into torch.mps; FakeMpsBackend overrides exactly these.
    def _current_allocated(self) -> int:
        return int(self._torch.mps.current_allocated_memory())

    def _driver_allocated(self) -> int:
        return int(self._torch.mps.driver_allocated_memory())

    def _recommended_max(self) -> int:
        return int(self._torch.mps.recommended_max_memory())

    def _event(self) -> Any:
        return self._torch.mps.Event(enable_timing=False)

    def name(self) -> str:
        from ..environment import chip_name

        return f"Apple {chip_name()} GPU (MPS)"

    def allocated(self) -> int | None:
        return self._current_allocated()

    def memory(self) -> MemoryFigures | None:
        recommended = self._recommended_max()
        ratio = high_watermark_ratio()
        return MemoryFigures(
            allocated=self._current_allocated(),
            cached=self._driver_allocated(),
            peak=None,
            total=recommended,
            limit=None if ratio is None else effective_limit(ratio, recommended),
        )

    def new_event(self) -> Any:
        return self._event()

    def synchronize(self) -> None:
        self._torch.mps.synchronize()

    def empty_cache(self) -> None:
        self._torch.mps.empty_cache()
