"""The step tracker's device-idle reading, on a scripted asynchronous device.

The real CUDA path is covered by ``test_gpu.py`` (``idle_gpu.py`` in both modes); this
pins down the timing of the event itself: recorded when a fetch begins (behind every
kernel queued so far, including work queued after the optimizer step) and queried when
the fetch ends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from helpers import FakeClock
from mpsprofiler.devices.base import DeviceBackend
from mpsprofiler.devices.cpu import CpuBackend
from mpsprofiler.events.step_rows import as_read
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


def tracked(device: Device) -> tuple[StepTracker, Callable[[], dict[str, list[Any]]]]:
    """A tracker on ``device`` and a function that drains it and returns its columns."""
    sent: list[dict[str, Any]] = []
    tracker = StepTracker(lambda kind, **payload: sent.append(as_read(payload)), device, FakeClock(tick=0.001))

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


class Allocating(Device):
    """A device whose allocator grows by 1 KiB a step (a slow leak)."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes = 0

    def allocated(self) -> int | None:
        return self.bytes


def run_steps(n: int, step_s: float, monkeypatch: Any, *, never_fast: bool = False,
              pauses: dict[int, float] | None = None) -> tuple[list[dict[str, Any]], Any]:
    """``n`` manual steps of ~``step_s`` (each with a fetch that finds the device idle
    every third step), drained every ~0.25 s as the channel thread does; returns the
    ``steps`` payloads and the session's fold of them."""
    from mpsprofiler.probe import steps as probe_steps
    from mpsprofiler.session.steps import StepStats

    if never_fast:
        monkeypatch.setattr(probe_steps, "FAST_STEP", 0.0)
    device = Allocating()
    clock = FakeClock(100.0)
    sent: list[dict[str, Any]] = []
    tracker = StepTracker(lambda kind, **payload: sent.append(as_read(payload)), device, clock)
    last_drain = clock.t
    for k in range(n):
        clock.t += step_s * 0.2
        started = tracker.on_fetch_start()
        if k % 3 == 0:
            device.run()
        clock.t += step_s * 0.3  # the wait
        tracker.on_fetch_end(started, True)
        device.queue(3)
        device.bytes += 1024
        clock.t += step_s * (0.3 + (k % 7) * 0.05)  # a spread of durations for the quantiles
        clock.t += (pauses or {}).get(k, 0.0)  # a checkpoint, an evaluation
        tracker.manual_step()
        if clock.t - last_drain >= 0.25:
            last_drain = clock.t
            tracker.drain()
    tracker.drain()
    stats = StepStats()
    for payload in sent:
        stats.feed(payload)  # type: ignore[arg-type]
    return sent, stats


def test_fast_steps_go_as_exact_aggregates_after_the_early_window(monkeypatch: Any) -> None:
    """At ~2,000 steps/s every step sent one by one cost the live view ~1% of a core to
    decode and fold. Past FAST_AFTER steps a fast block ends the detail; the session's
    figures stay the same as with every step in detail."""
    from mpsprofiler.probe.steps import FAST_AFTER

    sent, fast = run_steps(6000, 0.0005, monkeypatch)
    detailed = sum(len(p["i"]) for p in sent)
    assert FAST_AFTER <= detailed <= FAST_AFTER + 1024
    first_agg = next(k for k, p in enumerate(sent) if p.get("agg"))
    assert all(not p["i"] and p.get("agg") for p in sent[first_agg + 1:])  # one switch, never back
    with monkeypatch.context() as m:
        ref_sent, ref = run_steps(6000, 0.0005, m, never_fast=True)
    assert sum(len(p["i"]) for p in ref_sent) == 6000  # the old way, for comparison
    assert (fast.count, fast.last_index, fast.total_batches) == (ref.count, ref.last_index, ref.total_batches) == (6000, 5999, 6000)
    assert (fast.idle_waits, fast.busy_waits) == (ref.idle_waits, ref.busy_waits) == (2000, 4000)
    assert fast.warmup == ref.warmup
    for q in (0.1, 0.5, 0.9):
        assert fast.quantile(q) == ref.quantile(q)
    assert abs(fast.total_dur - ref.total_dur) < 1e-6 and abs(fast.total_wait - ref.total_wait) < 1e-6
    assert fast.data_wait_share() == pytest.approx(ref.data_wait_share())
    assert (fast.first_end, fast.last_end) == pytest.approx((ref.first_end, ref.last_end))
    # the charts' sample steps carry a device-memory reading (the memory trends need
    # them), but for the batches too short to hold one (the switch's, the last one)
    late = [p for p in fast.series.points() if p.i >= detailed]
    assert len(late) >= 4 and all(p.alloc is not None for p in late[1:-1])


def test_a_pause_among_aggregated_fast_steps_stays_on_the_step_chart(monkeypatch: Any) -> None:
    """Each aggregated batch sends its slowest step besides its sample, and the chart's
    series keeps the slowest of each thinned group: a 50 ms pause (a checkpoint every
    1,500 steps) among 0.5 ms steps is a point of the chart, with its real duration, in
    step order. The analyzers' evenly spread series is left as it was."""
    pauses = {3000: 0.05, 4500: 0.05}
    sent, stats = run_steps(6000, 0.0005, monkeypatch, pauses=pauses)
    assert sum(len(p["i"]) for p in sent) < 3000  # both pauses fall in the aggregates
    points = stats.chart.points()
    for i in pauses:
        (point,) = [p for p in points if p.i == i]
        assert point.dur > 0.05
    assert [p.i for p in points] == sorted({p.i for p in points})
    assert max(p.dur for p in points if p.i not in pauses) < 0.002


def test_slow_steps_keep_their_detail(monkeypatch: Any) -> None:
    sent, stats = run_steps(3000, 0.005, monkeypatch)
    assert sum(len(p["i"]) for p in sent) == 3000 and not any(p.get("agg") for p in sent)
    assert stats.idle_waits == 1000


def test_a_series_that_keeps_the_slowest_step_of_each_group() -> None:
    """Thinning keeps every group's slowest step (real points, in order); without
    ``keep`` the series thins as before: every other point."""
    from mpsprofiler.session.series import Series

    plain: Series[tuple[int, float]] = Series(8)
    slowest: Series[tuple[int, float]] = Series(8, keep=lambda a, b: a if a[1] > b[1] else b)
    spikes = {13, 37, 50}
    for i in range(64):
        point = (i, 9.0 if i in spikes else 1.0 + (i % 3) * 0.01)
        plain.append(point)
        slowest.append(point)
    kept = slowest.points()
    assert {i for i, _ in kept} >= spikes
    assert [i for i, _ in kept] == sorted({i for i, _ in kept})
    assert len(kept) <= 8 and len(plain.points()) <= 8
    assert not spikes & {i for i, _ in plain.points()}  # why: plain thinning drops them


def test_what_counted_the_steps_says_how_lightning_counts_two_optimizers() -> None:
    """A GAN under Lightning's manual optimization: one step per training batch here, while
    its global_step counts each optimizer's step (twice as many): the words say both."""
    from mpsprofiler.session.steps import signal_words

    assert signal_words("optimizer", "lightning", 0, 2) == (
        "optimizer steps of a Lightning Trainer, 2 optimizers stepping in each: Lightning's global_step counts 2 per step")
    assert signal_words("optimizer", None, 0, 2) == "optimizer steps, 2 optimizers stepping in each"
    assert signal_words("optimizer", "lightning", 0, 1) == "optimizer steps of a Lightning Trainer"
    # issue 28: with gradient_accumulation_steps=3 the 3 batches fetched ahead are the first
    # update's own: not counted as steps, and not dropped either
    assert signal_words("optimizer", "transformers Trainer", 3, 1) == (
        "optimizer steps of a Hugging Face Trainer, 3 batches fetched before the first step not counted as steps")


def _held_fetches(tracker: StepTracker, device: Device, n: int, by: str) -> None:
    """``n`` batches fetched by the module ``by`` and no backward pass or optimizer step yet."""
    tracker.first_fetch_by = by
    for _ in range(n):
        fetch(tracker, device, drains=True)


@pytest.mark.parametrize(("fetches", "in_training", "by", "steps"), [
    (2, False, "accelerate.data_loader", 0),  # accelerate's look-ahead: the first step's batch and the next
    (3, True, "lightning.pytorch.loops.fetchers", 0),  # Lightning: 2 sanity-check batches, then the first
    (5, True, "accelerate.data_loader", 0),  # a Trainer with gradient_accumulation_steps=4
    (11, False, "__main__", 10),  # a plain inference loop that crashed at its 11th batch keeps 10 steps
    (11, False, "accelerate.data_loader", 10),  # through accelerate, past its look-ahead, too
])
def test_a_crash_in_the_first_step_is_no_step(fetches: int, in_training: bool, by: str, steps: int) -> None:
    """Issue 28: a Trainer, Lightning or accelerate script whose first step raised was
    reported "crashed after its first step (step 0)" or "after 2 steps", the batches fetched
    ahead confirmed at exit as steps of a loop without training. The crash retracts them
    when the exception came out of a framework's training entry, or when they are no more
    than the loader's look-ahead."""
    device = Device()
    sent: list[dict[str, Any]] = []
    tracker = StepTracker(lambda kind, **payload: sent.append(as_read(payload)), device, FakeClock(tick=0.001))
    _held_fetches(tracker, device, fetches, by)
    begun = tracker.begun
    tracker.crashed(in_training)
    tracker.finish()
    tracker.drain()
    assert (len(sent[-1]["i"]) if sent else 0) == steps
    # the steps begun (the DataLoader hook's per-batch count): one counter that a retraction
    # leaves as it was, index + retracted
    assert tracker.begun == begun == tracker.index + tracker.retracted == fetches - 1


def test_the_steps_begun_stay_index_plus_retracted_when_training_starts() -> None:
    """Batches held before the first optimizer step are retracted into step 0: ``begun``
    (read at every batch by loader_sites, issue 34) is index + retracted throughout."""
    device = Device()
    tracker = StepTracker(lambda kind, **payload: None, device, FakeClock(tick=0.001))
    _held_fetches(tracker, device, 4, "__main__")
    assert tracker.held == 3 and tracker.begun == 3
    opt = object()
    for _ in range(5):
        tracker.on_optimizer_step(opt)
        fetch(tracker, device, drains=True)
        assert tracker.begun == tracker.index + tracker.retracted
    assert tracker.retracted == 3 and tracker.index >= 3


def test_the_crash_retracts_nothing_once_the_run_trains() -> None:
    device = Device()
    tracker, columns = tracked(device)
    learn(tracker, device, object())
    fetch(tracker, device, drains=True)
    tracker.crashed(True)
    tracker.finish()
    assert len(columns()["i"]) == 2  # the two steps before it, as without the crash


def test_the_gap_between_two_passes_over_a_loader_is_no_step_of_its_own() -> None:
    """Steps counted from DataLoader batches (an evaluation-only script: no optimizer, no
    backward): the StopIteration that ends a pass began a "step" that took no batch, closed
    by the next pass's first fetch. Before: 40 passes over 4 batches made 199 steps, 39 of
    them ~0.2 ms (the print and the new iterator between passes), pulling the median down.
    Now 160, and the gap is held by the next pass's first step (as an epoch's boundary is
    by an optimizer-counted step)."""
    from mpsprofiler.devices.cpu import CpuBackend

    sent: list[dict[str, Any]] = []
    clock = FakeClock()
    tracker = StepTracker(lambda kind, **payload: sent.append(as_read(payload)), CpuBackend(), clock)
    tracker.no_training_signal()
    for _ in range(3):
        for _ in range(4):
            started = tracker.on_fetch_start()
            clock.t += 0.001
            tracker.on_fetch_end(started, True)
            clock.t += 0.010  # the forward pass
        started = tracker.on_fetch_start()  # StopIteration
        tracker.on_fetch_end(started, False)
        clock.t += 0.0002  # a print, the next iterator
    tracker.finish()
    tracker.drain()
    cols = sent[-1]
    assert len(cols["dur"]) == 12  # one per batch: the last one's step ends at the last StopIteration
    assert cols["batches"] == [1] * 12
    assert min(cols["dur"]) == pytest.approx(0.011)
    assert max(cols["dur"]) == pytest.approx(0.0112)  # a pass's first step holds the gap before it


@pytest.mark.parametrize("sizes", [[1024, 1024, 1024, 1024], [1023, 1, 1024, 1025, 1023], [2048, 1, 1023, 1024, 900],
                                   [700] * 7, [1, 2047, 1, 1, 1022, 2048]])
def test_the_fold_ends_the_detail_where_a_row_by_row_fold_does(sizes: list[int]) -> None:
    """``_fold`` skips its per-row loop for a batch of consecutive steps with no block's
    first step among them; batches that start or end on a block's first step (1024, 2048,
    3072: where the fast-step check runs) end the detail at the same step as a fold that
    checks every row."""
    from mpsprofiler.probe import steps as probe_steps

    def detail(tracker: StepTracker) -> tuple[int, int]:
        return len(tracker._detailed), tracker._detail_end

    got, want = [], []
    for skip in (True, False):
        tracker = StepTracker(lambda kind, **payload: None, CpuBackend(), FakeClock(0.0))
        i, t = 0, 100.0
        for size in sizes:
            for _ in range(size):
                tracker._rows.append((i, t, t + 0.0005, 0.0, 1, None, None, 0.0, None, None, 0.0))
                i, t = i + 1, t + 0.0005
            if skip:
                tracker._fold()
            else:  # row by row: the loop's path for every batch
                batch = probe_steps.take(tracker._rows)
                for row in batch:
                    tracker._rows.append(row)
                    tracker._fold()
            (got if skip else want).append(detail(tracker))
    assert got == want
    assert want[-1][1] < probe_steps.DETAIL_LIMIT  # the fast steps did end the detail


def test_the_steps_a_wake_overlapped_are_found_by_bisection() -> None:
    """``StepTracker.drain`` marks the aggregated steps that a wake of the channel overlapped
    (events/step_agg.py ``peak_besides``): the steps that ended after the wake began and began
    before it ended, whatever the wakes' order."""
    from mpsprofiler.probe.steps import _in_spans

    rows = [(i, 10.0 + i, 11.0 + i, 0.0, 1, None, None, 0.0, None, None, 0.0) for i in range(10)]
    assert _in_spans(rows, []) == []
    assert _in_spans(rows, [(13.5, 13.6)]) == [3]  # inside step 3
    assert _in_spans(rows, [(16.5, 16.6), (13.9, 14.2)]) == [3, 4, 6]  # inside 6; across the end of 3 and start of 4
    assert _in_spans(rows, [(17.0, 17.0)]) == []  # at a boundary: neither step ran during it
    assert _in_spans(rows, [(25.0, 26.0), (0.0, 1.0)]) == []  # after the last step, before the first

    class Wakes:
        wake_spans = [(13.5, 13.6)]

    sent: list[dict[str, Any]] = []
    tracker = StepTracker(lambda kind, **payload: sent.append(payload), CpuBackend(), FakeClock(0.0))
    tracker.wakes = Wakes()
    tracker._agg_rows = list(rows)
    tracker.drain()
    assert sent[-1]["agg_slowed"] == [3]
