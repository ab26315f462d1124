"""The step tracker's device-idle reading, on a scripted asynchronous device.

The real CUDA path is covered by ``test_gpu.py`` (``idle_gpu.py`` in both modes); this
pins down the timing of the event itself: recorded when a fetch begins (behind every
kernel queued so far, including work queued after the optimizer step) and queried when
the fetch ends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mpsprofiler.devices.base import DeviceBackend
from mpsprofiler.probe.steps import StepTracker


class Device(DeviceBackend):
    """A GPU queue in miniature: ``queue()`` adds work, ``run()`` lets the device finish it."""

    kind = "cuda"
    asynchronous = True

    def __init__(self) -> None:
        self.queued = 0  # kernels queued so far
        self.done = 0  # kernels the device has finished
        self.events: list[Any] = []

    def queue(self, n: int = 1) -> None:
        self.queued += n

    def run(self) -> None:
        self.done = self.queued

    def new_event(self) -> Any:
        device = self

        class Event:
            mark = -1

            def record(self) -> None:
                self.mark = device.queued

            def query(self) -> bool:
                return device.done >= self.mark

        event = Event()
        self.events.append(event)
        return event

    def allocated(self) -> int | None:
        return None

    def memory(self) -> None:
        return None


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        self.t += 0.001
        return self.t


def tracked(device: Device) -> tuple[StepTracker, Callable[[], dict[str, list[Any]]]]:
    """A tracker on ``device`` and a function that drains it and returns its columns."""
    sent: list[dict[str, Any]] = []
    tracker = StepTracker(lambda kind, **payload: sent.append(payload), device, Clock())

    def columns() -> dict[str, list[Any]]:
        tracker.drain()
        return sent[-1]

    return tracker, columns


def fetch(tracker: StepTracker, device: Device, *, drains: bool) -> None:
    started = tracker.on_fetch_start()
    if drains:
        device.run()  # the host waits long enough for the device to finish its queue
    tracker.on_fetch_end(started, True)


def learn(tracker: StepTracker, device: Device, opt: object) -> None:
    """Two plain steps: the tracker learns the loop's optimizers at the second one."""
    for _ in range(2):
        fetch(tracker, device, drains=True)
        device.queue(3)
        tracker.on_optimizer_step(opt)


def test_work_queued_after_the_optimizer_step_keeps_the_wait_busy() -> None:
    device = Device()
    tracker, columns = tracked(device)
    opt = object()
    learn(tracker, device, opt)
    for busy in (False, True, True, False):
        if busy:
            device.queue(50)  # e.g. an EMA update or extra kernels after the last step
        fetch(tracker, device, drains=not busy)
        device.queue(3)  # forward, backward, optimizer
        tracker.on_optimizer_step(opt)
    assert columns()["idle"][2:] == [1, 0, 0, 1]


def test_any_fetch_that_finds_the_device_idle_marks_the_step() -> None:
    device = Device()
    tracker, columns = tracked(device)
    opt = object()
    learn(tracker, device, opt)
    for drains in ((False, True), (False, False), (True, False)):
        device.queue(10)
        for d in drains:  # two loaders per step (images and captions, say)
            fetch(tracker, device, drains=d)
        device.queue(3)
        tracker.on_optimizer_step(opt)
    assert columns()["idle"][2:] == [1, 0, 1]


def test_synchronous_devices_record_no_events() -> None:
    device = Device()
    device.asynchronous = False
    tracker, columns = tracked(device)
    for _ in range(3):
        fetch(tracker, device, drains=True)
        tracker.on_optimizer_step(object())
    assert device.events == []
    assert set(columns()["idle"]) == {None}


def test_no_event_until_the_script_uses_the_device() -> None:
    """The backend answers None before the device is initialised: nothing recorded, no error."""
    device = Device()
    device.new_event = lambda: None  # type: ignore[method-assign]
    tracker, columns = tracked(device)
    opt = object()
    for _ in range(3):
        fetch(tracker, device, drains=True)
        tracker.on_optimizer_step(opt)
    assert set(columns()["idle"]) == {None}
