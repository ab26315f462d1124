"""A fake MPS backend fed with recorded numbers, for testing MPS logic on any machine."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .mps import HOLD_SIZE, MpsBackend


class FakeEvent:
    """An event whose completion is scripted: ``done`` says what ``query`` answers."""

    def __init__(self, done: bool = True) -> None:
        self.done = done

    def record(self) -> None:
        return None

    def query(self) -> bool:
        return self.done


class FakeDevice:
    """A device's timeline on a host clock the test drives: work runs in queue order, each
    piece as soon as the host has queued it and the work before it is done."""

    def __init__(self, clock: Callable[[], float], wait: Callable[[float], None] | None = None) -> None:
        """``wait(t)``: move the host clock on to ``t`` (a sync, or host time spent); None:
        the host clock cannot be moved from here (then nothing may wait)."""
        self.clock = clock
        self.wait = wait
        self.queue_end = 0.0
        self.busy = 0.0
        """Seconds of work run (the truth device busy time is measured against)."""
        self.syncs = 0
        """Host waits for the whole queue (``elapsed_time`` of MPS events)."""

    def launch(self, seconds: float) -> None:
        self.queue_end = max(self.clock(), self.queue_end) + seconds
        self.busy += seconds

    def drained_at(self) -> float:
        """When the host would return from a sync (``.item()``) issued now."""
        return max(self.clock(), self.queue_end)

    def synchronize(self) -> None:
        """The host waits until the queue has run (``COMMIT_AND_WAIT``)."""
        assert self.wait is not None, "this fake device cannot make the host wait"
        self.syncs += 1
        self.wait(self.drained_at())


class FakeTimedEvent(FakeEvent):
    """A timing event on a :class:`FakeDevice`: done once the work queued before it ran.

    ``syncs``: ``elapsed_time`` first waits for the whole queue, as torch's MPS events do
    (``MPSEventPool::elapsedTime``, aten/src/ATen/mps/MPSEvent.mm); otherwise it needs both
    events completed, as CUDA's do (``CUDAEvent::elapsed_time``)."""

    def __init__(self, device: FakeDevice, syncs: bool = True) -> None:
        super().__init__()
        self._device = device
        self._syncs = syncs
        self.at: float | None = None

    def record(self) -> None:
        self.at = self._device.queue_end = self._device.drained_at()

    def query(self) -> bool:
        return self.at is not None and self._device.clock() >= self.at

    def elapsed_time(self, end: FakeTimedEvent) -> float:
        if self._syncs:
            self._device.synchronize()
        assert self.at is not None and end.at is not None and end.query(), "elapsed_time of events not done"
        return (end.at - self.at) * 1000.0


class FakeMpsBackend(MpsBackend):
    """Replays recorded ``(current_allocated, driver_allocated)`` pairs, one per reading.

    The last pair repeats once the recording is used up, like a training that has settled.
    """

    def __init__(
        self,
        samples: Iterable[tuple[int, int]],
        recommended_max: int | None = 21 * 1024**3,
        idle: bool = True,
        chip: str = "M2 Pro",
        device: FakeDevice | None = None,
        product_s: float = 3e-4,
        launch_s: float = 0.0,
    ) -> None:
        """``device``: a simulated timeline for timing events and holds (None: the backend
        has no timing events, like a torch without ``enable_timing``); ``product_s``: the
        true time of one hold product (the backend's first guess differs, as on a Mac);
        ``launch_s``: the host time of launching one (needs the device's ``wait``)."""
        self._samples = list(samples) or [(0, 0)]
        self._pos = 0
        self._recommended = recommended_max
        self._idle = idle
        self._chip = chip
        self._device = device
        self._product_s = product_s
        self._launch_s = launch_s

    def _advance(self) -> tuple[int, int]:
        sample = self._samples[min(self._pos, len(self._samples) - 1)]
        self._pos += 1
        return sample

    def _current_allocated(self) -> int:
        return self._advance()[0]

    def _driver_allocated(self) -> int:
        return self._samples[min(max(self._pos - 1, 0), len(self._samples) - 1)][1]

    def _recommended_max(self) -> int | None:
        return self._recommended  # None: a torch before 2.5 (no recommended_max_memory)

    def _event(self) -> FakeEvent:
        return FakeEvent(self._idle)

    def _timing_supported(self) -> bool:
        return self._device is not None

    def _timing_event(self) -> FakeTimedEvent:
        assert self._device is not None
        return FakeTimedEvent(self._device, syncs=self.elapsed_time_syncs)

    def _now(self) -> float:
        return self._device.clock() if self._device is not None else 0.0

    def _hold_work(self, count: int) -> None:
        device = self._device
        assert device is not None
        product = self._product_s * (self._hold_size / HOLD_SIZE) ** 3
        if not self._launch_s:
            device.launch(count * product)
            return
        assert device.wait is not None
        for _ in range(count):
            device.wait(device.clock() + self._launch_s)
            device.launch(product)

    def name(self) -> str:
        return f"Apple {self._chip} GPU (MPS)"

    def synchronize(self) -> None:
        return None

    def empty_cache(self) -> None:
        return None
