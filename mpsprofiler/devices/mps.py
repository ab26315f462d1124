"""MPS backend (Apple silicon), on the documented ``torch.mps`` API only.

This code cannot run on Linux; tests drive the same logic through
:class:`~mpsprofiler.devices.fake.FakeMpsBackend`, which subclasses this one and
replaces only the calls into ``torch.mps``.
"""

from __future__ import annotations

import os
import time
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


HOLD_SIZE = 512
"""The hold's products are 512 x 512 at first (0.27 GFLOP each): the time one takes on
this GPU is measured (``held``), and the count sized from it."""
HOLD_SIZE_MAX = 2048
"""Where the GPU runs a product faster than the host launches the next, the hold cannot
get ahead of the host: the products then grow (twice the side, eight times the work),
up to this side (16 MiB of float32 per buffer)."""
LAUNCH_PACED = 1.2
"""A hold whose device time was at most this times its launching time ran as fast as the
host launched it."""
HOLD_MAX_PRODUCTS = 2000
"""At most this many launches per hold; their host time is counted in device timing's
budget (probe/device_time.py ``COST_SHARE``)."""


def timing_supported(torch: Any) -> bool:
    """Whether the installed torch's ``torch.mps.Event`` measures time.

    ``torch.mps.Event`` came with ``enable_timing`` and ``elapsed_time`` from the start
    (pytorch/pytorch PR #102121, "[MPS] Introduce torch.mps.Event() APIs", commit
    a870c7ea2e546829bfa09e04f03a1b3392a59db8: torch/mps/event.py ``class Event``,
    ``__init__(self, enable_timing=False)`` and ``elapsed_time(self, end_event)``, backed by
    ``torch._C._mps_elapsedTimeOfEvents``), first released in torch 2.1: the torch.mps docs
    of 2.1 list "MPS Event: event.Event" (https://docs.pytorch.org/docs/2.1/_sources/mps.rst.txt),
    those of 2.0 do not (https://docs.pytorch.org/docs/2.0/_sources/mps.rst.txt). Read from
    the installed torch, not from its version, so a build without it simply measures no
    device time.
    """
    import inspect

    event = getattr(getattr(torch, "mps", None), "Event", None)
    if event is None or not callable(getattr(event, "elapsed_time", None)):
        return False
    try:
        return "enable_timing" in inspect.signature(event.__init__).parameters
    except (TypeError, ValueError):
        return False


class MpsBackend(DeviceBackend):
    kind = "mps"
    asynchronous = True
    elapsed_time_syncs = True
    """``torch.mps.Event.elapsed_time`` waits for the device: ``MPSEventPool::elapsedTime``
    (pytorch/pytorch aten/src/ATen/mps/MPSEvent.mm) runs
    ``m_default_stream->synchronize(SyncType::COMMIT_AND_WAIT)`` before reading the events'
    times. probe/device_time.py reads MPS events only where that sync is paid for."""
    _per_product_s = 2e-4
    """Seconds one hold product takes (a first guess; calibrated by ``held``)."""
    _hold_size = HOLD_SIZE

    def __init__(self) -> None:
        import torch

        self._torch = torch

    # The calls into torch.mps (and the clock); FakeMpsBackend overrides exactly these.
    def _current_allocated(self) -> int:
        return int(self._torch.mps.current_allocated_memory())

    def _driver_allocated(self) -> int:
        return int(self._torch.mps.driver_allocated_memory())

    def _recommended_max(self) -> int | None:
        """None on torch 2.1-2.4: ``torch.mps.recommended_max_memory`` came with 2.5
        (pytorch/pytorch PR #128289, merged after the 2.4 branch cut; the torch.mps docs of
        2.4 do not list it). Without it the limit is not known, the tensor and driver
        memory still are."""
        read = getattr(self._torch.mps, "recommended_max_memory", None)
        return None if read is None else int(read())

    def _event(self) -> Any:
        return self._torch.mps.Event(enable_timing=False)

    def _timing_event(self) -> Any:
        return self._torch.mps.Event(enable_timing=True)

    def _hold_work(self, count: int) -> None:
        """``count`` matrix products on a buffer of the probe's own: torch.mps has no
        counterpart of ``torch.cuda._sleep`` (torch/mps/__init__.py defines none)."""
        torch = self._torch
        size = self._hold_size
        buf: Any = getattr(self, "_hold_buf", None)
        if buf is None or buf.shape[0] != size:
            buf = self._hold_buf = torch.zeros(size, size, device="mps")
            self._hold_out = torch.empty_like(buf)
        out = self._hold_out
        for _ in range(count):
            torch.mm(buf, buf, out=out)

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
            limit=None if ratio is None or recommended is None else effective_limit(ratio, recommended),
        )

    def new_event(self) -> Any:
        return self._event()

    def _timing_supported(self) -> bool:
        return timing_supported(self._torch)

    def timing_event(self) -> Any:
        if not self._timing_supported():
            return None
        return self._timing_event()

    def _now(self) -> float:
        return time.perf_counter()

    def hold(self, seconds: float) -> float | None:
        count = max(1, min(HOLD_MAX_PRODUCTS, round(seconds / self._per_product_s)))
        t = self._now()
        self._hold_work(count)
        self._hold_launch_s = self._now() - t
        self._hold_count = count
        return count * self._per_product_s

    def held(self, asked: float, measured: float) -> None:
        count = getattr(self, "_hold_count", 0)
        if not count or measured <= 0:
            return
        launch = getattr(self, "_hold_launch_s", 0.0)
        if launch > 0 and measured <= LAUNCH_PACED * launch and self._hold_size < HOLD_SIZE_MAX:
            self._hold_size *= 2  # launch-paced: bigger products, eight times the work each
            self._per_product_s = max(1e-6, 8.0 * measured / count)
        else:
            self._per_product_s = max(1e-6, measured / count)

    def synchronize(self) -> None:
        self._torch.mps.synchronize()

    def empty_cache(self) -> None:
        self._torch.mps.empty_cache()
