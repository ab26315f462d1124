"""CUDA backend, on ``torch.cuda``'s public API.

It never initialises CUDA itself: until the script has used the GPU every figure is None,
so the probe cannot create a context (or change which device is current) behind its back.
"""

from __future__ import annotations

from typing import Any

from .base import DeviceBackend, MemoryFigures


class CudaBackend(DeviceBackend):
    kind = "cuda"
    asynchronous = True
    elapsed_time_syncs = False
    """``torch.cuda.Event.elapsed_time`` never waits: ``CUDAEvent::elapsed_time``
    (aten/src/ATen/cuda/CUDAEvent.h) refuses events that have not completed and reads the
    two completed ones with ``cudaEventElapsedTime``."""

    def __init__(self, index: int | None = None) -> None:
        import torch

        self._torch = torch
        self._index = index
        self._cycles_per_s = 1.5e9
        """GPU clock cycles per second for ``hold`` (a first guess; calibrated by ``held``)."""

    def _ready(self) -> bool:
        return bool(self._torch.cuda.is_initialized())

    def _device(self) -> int:
        return self._index if self._index is not None else self._torch.cuda.current_device()

    def name(self) -> str:
        try:
            return str(self._torch.cuda.get_device_name(self._device()))
        except Exception:
            return "CUDA GPU"

    def allocated(self) -> int | None:
        if not self._ready():
            return None
        return int(self._torch.cuda.memory_allocated(self._device()))

    def memory(self) -> MemoryFigures | None:
        if not self._ready():
            return None
        cuda = self._torch.cuda
        dev = self._device()
        total = int(cuda.get_device_properties(dev).total_memory)
        fraction = _memory_fraction(cuda, dev)
        return MemoryFigures(
            allocated=int(cuda.memory_allocated(dev)),
            cached=int(cuda.memory_reserved(dev)),
            peak=int(cuda.max_memory_allocated(dev)),
            total=total,
            limit=int(total * fraction),
        )

    def new_event(self) -> Any:
        if not self._ready():
            return None
        return self._torch.cuda.Event()

    def timing_event(self) -> Any:
        if not self._ready():
            return None
        return self._torch.cuda.Event(enable_timing=True)

    def hold(self, seconds: float) -> float | None:
        """``torch.cuda._sleep(cycles)`` (torch/cuda/__init__.py: a kernel that spins for a
        number of GPU clock cycles, used by torch's own stream tests); the cycle rate is
        calibrated from each hold's measured time (``held``)."""
        sleep = getattr(self._torch.cuda, "_sleep", None)
        if sleep is None or not self._ready():
            return None
        sleep(max(1, int(seconds * self._cycles_per_s)))
        return seconds

    def held(self, asked: float, measured: float) -> None:
        if asked > 0 and measured > 0:
            self._cycles_per_s = max(1e7, min(1e11, self._cycles_per_s * asked / measured))

    def synchronize(self) -> None:
        if self._ready():
            self._torch.cuda.synchronize()

    def empty_cache(self) -> None:
        if self._ready():
            self._torch.cuda.empty_cache()


def _memory_fraction(cuda: Any, dev: int) -> float:
    """The per-process memory fraction set with ``set_per_process_memory_fraction``.

    torch keeps it in the caching allocator's settings; there is no public getter, so
    read it where it exists and assume 1.0 elsewhere.
    """
    try:
        getter = getattr(cuda.memory, "get_per_process_memory_fraction", None)
        if getter is not None:
            return float(getter(dev))
    except Exception:
        pass
    return 1.0
