"""Device busy time per step, measured behind a hold (probe/device_time.py), driven on a
simulated device timeline (devices/fake.py): a launch-bound loop reads its true kernel
time, not the host's; a device-bound loop its backlog's work; a sync in the step drops
the reading; MPS events (whose elapsed_time syncs) are read only on sampled steps; the
holds, their launches and the reads cost at most COST_SHARE of the run; MPS timing events
only where the installed torch has them."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from types import SimpleNamespace

import pytest
import torch

from mpsprofiler.devices.fake import FakeDevice, FakeMpsBackend
from mpsprofiler.devices.mps import HOLD_MAX_PRODUCTS, HOLD_SIZE, HOLD_SIZE_MAX, timing_supported
from mpsprofiler.probe.device_time import COST_SHARE, MAX_HOLD_S, DeviceTimer


class Loop:
    """A training loop on a fake device: ``ops`` launches per step, each costing the host
    ``host_op`` seconds and the device ``kernel`` seconds; op-sampled steps as given.

    ``syncs``: the device's timing events synchronise when read (MPS, the default) or not
    (CUDA); ``sync_at_start``: the steps (all, or those a predicate picks) that begin with
    a ``loss.item()``; ``launch_s``/``product_s``: the host and device time of one MPS hold
    product; ``timed=False``: the same loop without device timing (the truth for costs)."""

    def __init__(self, ops: int, host_op: float, kernel: float, sampled=frozenset({0, 1, 4, 9, 14, 19}),
                 sync_at_start: bool | Callable[[int], bool] = False, max_ahead: float = 1e9,
                 syncs: bool = True, launch_s: float = 0.0, product_s: float = 3e-4, timed: bool = True) -> None:
        self.now = 0.0
        self.device = FakeDevice(lambda: self.now, self._wait)
        self.backend = FakeMpsBackend([(0, 0)], device=self.device, launch_s=launch_s, product_s=product_s)
        if not syncs:
            self.backend.elapsed_time_syncs = False  # CUDA's events: read without a sync
        self.sent: list[dict] = []
        self.sampled = sampled
        self.ops_step: int | None = None
        self.timer = DeviceTimer(lambda kind, **f: self.sent.append(f), lambda: self.backend,
                                 lambda: self.ops_step, lambda: self.now)
        self.ops, self.host_op, self.kernel, self.timed = ops, host_op, kernel, timed
        self.sync_at = sync_at_start if callable(sync_at_start) else (lambda i: bool(sync_at_start))
        self.max_ahead = max_ahead
        """How far the host may run ahead of the device (CUDA's launch queue is bounded)."""
        self.sync_steps: list[int] = []
        """Boundaries at which reading the events made the host wait for the device."""
        self.wall = 0.0
        """When the training's last work was done (host and device)."""

    def _wait(self, t: float) -> None:
        self.now = max(self.now, t)

    def _boundary(self, i: int, last: float | None) -> None:
        if not self.timed:
            return
        before = self.device.syncs
        self.timer.on_boundary(i, last)
        if self.device.syncs > before:
            self.sync_steps.append(i)

    def run(self, steps: int) -> list[dict]:
        last = None
        for i in range(steps):
            is_sampled = self.sampled(i) if callable(self.sampled) else i in self.sampled
            self.ops_step = i if is_sampled else None  # the op sampler's listener ran first
            self._boundary(i, last)
            t0 = self.now
            if self.sync_at(i):
                self.now = self.device.drained_at()  # loss.item() of the previous step
            for _ in range(self.ops):
                self.now = max(self.now + self.host_op, self.device.queue_end - self.max_ahead)
                self.device.launch(self.kernel)
            last = self.now - t0
        self.wall = self.device.drained_at()
        self.now = self.wall + 1.0
        self.ops_step = None
        self._boundary(steps, last)
        if self.timed:
            before = self.device.syncs
            self.timer.close()
            if self.device.syncs > before:
                self.sync_steps.append(steps)
        return [f for f in self.sent if f["what"] == "device_time"]


def every(n: int) -> Callable[[int], bool]:
    return lambda i: i % n == 0


@pytest.mark.parametrize("syncs", [True, False], ids=["mps", "cuda"])
def test_launch_bound_loop_reads_kernel_time_not_host_time(syncs):
    loop = Loop(ops=200, host_op=20e-6, kernel=2e-6, sampled=every(5), syncs=syncs)  # host 4 ms, device 0.4 ms
    readings = loop.run(1500)
    valid = [r for r in readings if r["valid"]]
    assert len(valid) >= 5 and all(r["busy_s"] == pytest.approx(200 * 2e-6, rel=1e-6) for r in valid)
    assert all(r["host_s"] > 5 * r["busy_s"] for r in valid)  # the device idles most of the step
    # never a sampled step (its dispatch mode slows the host), from step 3
    assert all(r["step"] >= 3 and r["step"] % 5 != 0 for r in readings)


def test_mps_events_are_read_on_sampled_steps_only_and_cuda_events_never_wait():
    """torch's MPS elapsed_time waits for the whole queue (MPSEventPool::elapsedTime,
    COMMIT_AND_WAIT): read only where the op sampler samples, or at exit; CUDA's never."""
    mps = Loop(ops=100, host_op=10e-6, kernel=30e-6, sampled=every(5))  # device-bound: a read waits
    assert mps.run(800)
    assert mps.sync_steps and all(i % 5 == 0 or i == 800 for i in mps.sync_steps)
    assert mps.timer.reads_synced == len(mps.sync_steps)
    cuda = Loop(ops=100, host_op=10e-6, kernel=30e-6, sampled=every(5), syncs=False)
    assert cuda.run(800) and cuda.device.syncs == 0 and cuda.sync_steps == []


def test_reading_waits_are_counted_in_the_cost():
    loop = Loop(ops=100, host_op=10e-6, kernel=30e-6, sampled=every(5))
    loop.run(800)
    plain = Loop(ops=100, host_op=10e-6, kernel=30e-6, sampled=every(5), timed=False)
    plain.run(800)
    assert 0 < loop.wall - plain.wall <= loop.timer.cost_s + 1e-9  # the cost counted covers what it took


@pytest.mark.parametrize("case", ["device-bound", "costly-mps-hold", "drained-holds"])
def test_timing_costs_at_most_its_share_of_the_run(case):
    """Holds (and their growth after drained readings), their launches and the reads stay
    within COST_SHARE of the training time, plus the one reading in flight when it ran out."""
    kw: dict = {"sampled": every(4)}
    if case == "device-bound":  # each hold delays the run by its whole length
        kw.update(ops=100, host_op=10e-6, kernel=100e-6, max_ahead=0.03)
    elif case == "costly-mps-hold":  # launching a product takes longer than running it
        kw.update(ops=200, host_op=20e-6, kernel=2e-6, launch_s=40e-6, product_s=20e-6)
    else:  # every other step syncs: half the readings drained, holds grown to 16x
        kw.update(ops=100, host_op=20e-6, kernel=10e-6, sync_at_start=lambda i: i % 2 == 1)
    loop = Loop(**kw)
    readings = loop.run(3000)
    plain = Loop(**kw, timed=False)
    plain.run(3000)
    timer = loop.timer
    assert readings and timer.paused > 0  # the budget held timing back
    one = MAX_HOLD_S + HOLD_MAX_PRODUCTS * kw.get("launch_s", 0.0) + max(r["host_s"] for r in readings)
    assert timer.cost_s <= COST_SHARE * timer.run_s + one
    assert loop.wall - plain.wall <= timer.cost_s + 1e-9  # and the cost counted covers what the run paid
    assert loop.wall - plain.wall <= COST_SHARE * plain.wall + one


def test_a_hold_launched_slower_than_it_runs_grows_its_products_or_gives_up():
    grows = Loop(ops=200, host_op=20e-6, kernel=2e-6, sampled=every(4), launch_s=40e-6, product_s=20e-6)
    readings = grows.run(3000)
    assert grows.backend._hold_size == 2 * HOLD_SIZE and sum(r["valid"] for r in readings) >= 3
    tiny = Loop(ops=200, host_op=20e-6, kernel=2e-6, sampled=every(4), launch_s=40e-6, product_s=0.5e-6)
    tiny.run(3000)
    off = [f["reason"] for f in tiny.sent if f["what"] == "device_timing_off"]
    assert tiny.backend._hold_size == HOLD_SIZE_MAX and off and "could not get ahead" in off[0]


def test_device_bound_loop_reads_its_work():
    loop = Loop(ops=100, host_op=10e-6, kernel=100e-6, max_ahead=0.03, sampled=every(4))  # host 1 ms, device 10 ms
    readings = [r for r in loop.run(3000) if r["valid"]]
    assert readings and all(r["busy_s"] == pytest.approx(100 * 100e-6, rel=1e-6) for r in readings)
    # a busy device: three readings say so and no more holds delay the run
    assert len(readings) <= 3


def test_a_sync_in_the_step_drops_the_reading_and_times_out():
    loop = Loop(ops=50, host_op=20e-6, kernel=50e-6, sampled=every(5), sync_at_start=True)
    readings = loop.run(4000)
    assert readings and not any(r["valid"] for r in readings)
    off = [f for f in loop.sent if f["what"] == "device_timing_off"]
    assert off and "sync" in off[0]["reason"]


def test_hold_is_calibrated_from_its_measured_time():
    loop = Loop(ops=200, host_op=20e-6, kernel=2e-6, sampled=every(5))
    guess = loop.backend._per_product_s
    loop.run(300)
    assert loop.backend._per_product_s == pytest.approx(loop.backend._product_s) != guess


def test_no_timing_events_no_reading():
    loop = Loop(ops=10, host_op=1e-5, kernel=1e-6)
    loop.backend = FakeMpsBackend([(0, 0)])  # a torch without enable_timing
    assert loop.run(12) == []
    assert loop.sent[0]["what"] == "device_timing_off"


def test_mps_timing_support_is_read_from_the_installed_torch():
    event = getattr(torch.mps, "Event", None)
    expected = event is not None and callable(getattr(event, "elapsed_time", None)) and \
        "enable_timing" in inspect.signature(event.__init__).parameters
    assert timing_supported(torch) is expected

    class Untimed:
        def __init__(self) -> None: ...

    assert timing_supported(SimpleNamespace(mps=SimpleNamespace(Event=Untimed))) is False
    assert timing_supported(SimpleNamespace()) is False
