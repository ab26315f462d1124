"""The backend interface and the memory figures every backend reports."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol


@dataclass
class MemoryFigures:
    """Device memory in bytes; None where the device has no such figure.

    * ``allocated``: bytes held by live tensors (MPS ``current_allocated_memory``,
      CUDA ``memory_allocated``);
    * ``cached``: what the device driver / caching allocator holds for the process
      (MPS ``driver_allocated_memory``, CUDA ``memory_reserved``);
    * ``peak``: the allocator's high-water mark of ``allocated`` (CUDA only);
    * ``total``: the device's memory (CUDA ``total_memory``; MPS ``recommended_max_memory``);
    * ``limit``: where the allocator refuses to go further: MPS recommended max x high
      watermark ratio (None when the ratio is 0.0, i.e. unlimited), CUDA total x the
      per-process memory fraction.
    """

    allocated: int | None = None
    cached: int | None = None
    peak: int | None = None
    total: int | None = None
    limit: int | None = None

    def as_dict(self) -> dict[str, int | None]:
        return asdict(self)


class DeviceEvent(Protocol):
    """A marker in the device's stream (``torch.cuda.Event`` / ``torch.mps.Event``)."""

    def record(self) -> Any: ...

    def query(self) -> bool: ...


class DeviceBackend:
    """Base backend: a synchronous device with no memory of its own (the CPU)."""

    kind = "cpu"
    asynchronous = False
    """True when kernels run after the Python call returns (MPS, CUDA): only then can the
    device be busy while the host waits for data, and only then does a sync cost time."""

    def name(self) -> str:
        return "CPU"

    def memory(self) -> MemoryFigures | None:
        """Current figures, or None when the device has none (CPU) or is not in use yet."""
        return None

    def allocated(self) -> int | None:
        """Bytes held by tensors: the one figure cheap enough to read at every step."""
        return None

    def new_event(self) -> DeviceEvent | None:
        """A stream event for idle detection, or None where the device is synchronous."""
        return None

    def timing_event(self) -> DeviceEvent | None:
        """A stream event that measures time (``elapsed_time``), or None where the device
        (or the installed torch) has none: then device busy time is not measured."""
        return None

    def hold(self, seconds: float) -> float | None:
        """Queue device work that keeps the device busy for about ``seconds`` and touches no
        tensor of the script, so the work queued after it runs back to back (see
        probe/device_time.py); returns the seconds asked of the device, or None where it
        cannot (a synchronous device)."""
        return None

    def held(self, asked: float, measured: float) -> None:
        """The last hold asked for ``asked`` seconds took ``measured``: calibrate the next."""
        return None

    def synchronize(self) -> None:
        return None

    def empty_cache(self) -> None:
        return None
