"""The ring of losses (probe/loss_ring.py) behind the loss check (probe/health.py), on the
CPU: the ring and its host buffers are CPU tensors, the losses stand-ins that say they
live on CUDA or MPS, and the events' completion is scripted. The real CUDA run is
tests/e2e/test_gpu_health.py."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from mpsprofiler.probe import loss_ring
from mpsprofiler.probe.health import LossWatch
from mpsprofiler.probe.loss_ring import LossRing, for_loss

DEVICE = SimpleNamespace(type="cuda")


class DevLoss:
    """A one-element loss that says it lives on ``DEVICE``; ``detach`` gives its value as
    a CPU tensor (what the ring's slot copies, or ``.item()`` reads)."""

    def __init__(self, value: float, dtype: torch.dtype = torch.float32) -> None:
        self.value, self.dtype, self.device = value, dtype, DEVICE
        self.detaches = 0

    def numel(self) -> int:
        return 1

    def element_size(self) -> int:
        return torch.empty(0, dtype=self.dtype).element_size()

    def is_floating_point(self) -> bool:
        return True

    def detach(self) -> torch.Tensor:
        self.detaches += 1  # once per ring write, once per .item() read (a sync on a device)
        return torch.tensor(self.value, dtype=self.dtype)


class Event:
    """A device event whose completion the test says (``Events.done``)."""

    def __init__(self, owner: Events) -> None:
        self.owner, self.recorded = owner, False
        self.index = len(owner.made)

    def record(self) -> None:
        if self.owner.fail_record:
            raise RuntimeError("cudaErrorLaunchFailure (scripted)")
        self.recorded = True

    def query(self) -> bool:
        self.owner.queries += 1
        return self.recorded and self.index < self.owner.done


class Events:
    def __init__(self) -> None:
        self.made: list[Event] = []
        self.done: float = math.inf
        """Events made before this index have completed."""
        self.queries = 0
        self.fail_record = False

    def __call__(self) -> Event:
        event = Event(self)
        self.made.append(event)
        return event


def cuda_ring(events: Events, size: int = 8, read_every: int = 4, buffers: int = 2) -> LossRing:
    return LossRing(torch.zeros(size), DevLoss, event=events, buffers=tuple(torch.zeros(size) for _ in range(buffers)),
                    device=DEVICE, read_every=read_every)


def watch_with(ring: LossRing | None, sampled=lambda: False) -> tuple[LossWatch, list[dict], list[int]]:
    sent: list[dict] = []
    step = [0]
    made: list[LossRing | None] = []

    def make(loss, modes):
        made.append(ring)
        return ring

    watch = LossWatch(lambda kind, **f: sent.append(f), lambda: step[0], sampled, ring=make)
    return watch, sent, step


def train(watch: LossWatch, step: list[int], steps: range, nan_at: int | None, losses: list[DevLoss] | None = None):
    for i in steps:
        step[0] = i
        loss = DevLoss(math.nan if nan_at is not None and i >= nan_at else 1.0 / (i + 1))
        if losses is not None:
            losses.append(loss)
        watch.on_backward((loss,))


def test_first_nan_named_at_its_step_across_wraps_with_no_item():
    events = Events()
    watch, sent, step = watch_with(cuda_ring(events))
    losses: list[DevLoss] = []
    train(watch, step, range(60), nan_at=37, losses=losses)
    assert all(loss.detaches == 1 for loss in losses[:41])  # one copy each, never a .item() (a sync)
    assert len(sent) == 1
    bad = sent[0]
    assert bad["step"] == 37 and bad["value"] == "nan" and bad["checked"] == "every step"
    assert bad["last_finite_step"] == 36 and bad["last_finite_loss"] == pytest.approx(1 / 37)
    assert watch.ring is not None and watch.ring.written == 41  # read after loss 39, taken at 40; no copy after
    assert watch.summary()["checked"] == "every step"


def test_no_read_before_the_copy_has_landed():
    """Reads in flight are only asked ``query()``; their values are taken once it says so."""
    events = Events()
    events.done = 0
    ring = cuda_ring(events)
    watch, sent, step = watch_with(ring)
    train(watch, step, range(8), nan_at=5)
    assert len(events.made) == 2 and ring.pending() == 2  # reads after losses 3 and 7, none landed
    assert watch.checks == 0 and not sent and events.queries == 4  # one query() per step
    events.done = 1
    train(watch, step, range(8, 9), nan_at=5)
    assert watch.checks == 4 and not sent  # losses 0-3: finite
    events.done = 2
    train(watch, step, range(9, 10), nan_at=5)
    assert [f["step"] for f in sent] == [5] and sent[0]["checked"] == "every step"
    assert sent[0]["last_finite_step"] == 4


def test_losses_lost_behind_a_slow_device_leave_a_window():
    """Both buffers in flight while the host writes on: the oldest unread losses are
    overwritten, and the first NaN read after them is a window, not a step."""
    events = Events()
    events.done = 0
    ring = cuda_ring(events)
    watch, sent, step = watch_with(ring)
    train(watch, step, range(30), nan_at=12)
    assert ring.pending() == 2 and watch.checks == 0  # reads of losses 0-3 and 4-7 in flight
    events.done = math.inf
    train(watch, step, range(30, 31), nan_at=12)
    assert watch.checks == 8 and not sent  # losses 0-7 read, finite; 8-30 not read yet
    train(watch, step, range(31, 36), nan_at=12)
    bad = sent[0]
    assert bad["step"] == 23 and bad["checked"] == "sampled steps" and bad["last_finite_step"] == 7
    # the ring holds the last 8 losses (23-30): losses 8-22 were overwritten unread


def test_a_failing_ring_switches_off_silently_and_sampled_reads_take_over():
    events = Events()
    ring = cuda_ring(events)
    sampled = {9}
    watch, sent, step = watch_with(ring, sampled=lambda: step[0] in sampled)
    train(watch, step, range(4), nan_at=None)  # a read of losses 0-3 started
    events.fail_record = True  # the next read's event fails (a device error)
    losses: list[DevLoss] = []
    train(watch, step, range(4, 9), nan_at=5, losses=losses)
    assert watch.ring_off and not sent and watch.checks == 4  # losses 0-3 read; no finding from a failure
    assert [loss.detaches for loss in losses] == [1, 1, 1, 1, 0]  # copied into the ring until it failed
    train(watch, step, range(9, 10), nan_at=5, losses=losses)
    assert losses[-1].detaches == 1  # step 9: the sampled read
    assert sent[0]["step"] == 9 and sent[0]["checked"] == "sampled steps" and sent[0]["last_finite_step"] == 3


def test_a_loss_the_ring_cannot_take_switches_it_off():
    """A float64 loss into a float32 ring would overflow to a false inf: not taken."""
    watch, sent, step = watch_with(cuda_ring(Events()))
    step[0] = 1
    watch.on_backward((DevLoss(1e300, torch.float64),))
    assert watch.ring_off and not sent and watch.checks == 0


def test_no_ring_for_a_cpu_loss_nor_a_subclass():
    def make(loss, modes):
        raise AssertionError("a CPU loss is read at once, never copied")

    watch = LossWatch(lambda kind, **f: None, lambda: 0, lambda: False, ring=make)
    watch.on_backward(torch.tensor(1.0))
    assert watch.checks == 1 and watch.ring is None
    assert for_loss(torch.tensor(1.0)) is None  # the real factory: CUDA and MPS only
    assert for_loss(DevLoss(1.0)) is None


def test_exit_reads_what_is_left_and_never_waits_for_ever():
    events = Events()
    ring = cuda_ring(events)
    watch, sent, step = watch_with(ring)
    train(watch, step, range(6), nan_at=5)  # losses 4-5 never read during the run
    watch.close()
    assert sent[0]["step"] == 5 and sent[0]["checked"] == "every step"
    stuck = Events()
    stuck.done = 0
    ring = cuda_ring(stuck)
    watch, sent, step = watch_with(ring)
    train(watch, step, range(6), nan_at=5)
    waited: list[float] = []
    now = [0.0]

    def sleep(s: float) -> None:
        waited.append(s)
        now[0] += s

    assert ring.flush(wait_s=0.05, sleep=sleep, clock=lambda: now[0]) == [] and 0.05 <= sum(waited) < 0.06
    assert not sent


def test_mps_ring_is_read_on_sampled_steps_only():
    """MPS: the ring is read where the probe waits anyway (an op-sampled step), all the
    losses since the last read at once: exact while the ring holds them all."""
    reads = [0]

    class Ring(LossRing):
        def read_now(self):
            reads[0] += 1
            return super().read_now()

    ring = Ring(torch.zeros(8), DevLoss, device=DEVICE)
    sampled = {3, 7, 30}
    watch, sent, step = watch_with(ring, sampled=lambda: step[0] in sampled)
    losses: list[DevLoss] = []
    train(watch, step, range(8), nan_at=5, losses=losses)
    assert reads[0] == 2 and all(loss.detaches == 1 for loss in losses)  # no .item()
    assert sent[0]["step"] == 5 and sent[0]["checked"] == "every step" and sent[0]["last_finite_step"] == 4
    # an interval longer than the ring: the window between the last read and the ring's oldest
    ring = Ring(torch.zeros(8), DevLoss, device=DEVICE)
    watch, sent, step = watch_with(ring, sampled=lambda: step[0] in sampled)
    train(watch, step, range(31), nan_at=12)
    bad = sent[0]
    assert bad["step"] == 23 and bad["checked"] == "sampled steps" and bad["last_finite_step"] == 7


def test_grad_norms_after_the_nan_are_not_what_preceded_it():
    events = Events()
    events.done = 0
    watch, sent, step = watch_with(cuda_ring(events))
    for i in range(10):
        step[0] = i
        watch.on_backward((DevLoss(math.nan if i >= 5 else 1.0),))
        watch.grad_norms.append((i, 100.0 if i >= 5 else 1.0))  # as sampled grad-norm reads would
    events.done = math.inf
    watch.close()
    assert sent[0]["step"] == 5 and sent[0]["grad_norm_last_step"] == 5
    assert sent[0]["grad_norm_median"] == 1.0


def test_write_is_one_copy_per_step(monkeypatch):
    """The per-step path: a copy into a slot view made once, no read but every
    ``read_every`` losses (the cost is measured in the report of issue 30)."""
    ring = cuda_ring(Events(), size=64, read_every=16, buffers=4)
    copies = []
    original = torch.Tensor.copy_

    def copy_(self, src, non_blocking=False):
        copies.append(tuple(self.shape))
        return original(self, src, non_blocking)

    monkeypatch.setattr(torch.Tensor, "copy_", copy_)
    watch, sent, step = watch_with(ring)
    train(watch, step, range(32), nan_at=None)
    assert copies.count(()) == 32 and copies.count((64,)) == 2  # 32 slot writes, 2 ring reads
    assert loss_ring.READ_EVERY == 16
