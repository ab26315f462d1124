"""Host-to-device copy time on CUDA (probe/copies.py CopyTimer, through the op sampler's
mode in probe/ops_mode.py -> session/health.py -> analyzers/copies.py -> pageable-copies),
on the CPU with fake events: which ops are timed, that nothing is read before its events
complete, that a failure switches the timer off, that CPU copies are left alone. The real
CUDA run is tests/e2e/test_gpu_health.py."""

from __future__ import annotations

import math

import torch

from mpsprofiler import events
from mpsprofiler.probe.copies import MAX_TIMED, CopyTimer, _h2d
from mpsprofiler.probe.ops_mode import OpMode
from tests.unit.test_analyzers import LINUX_ENV, build_session, step_rows
from tests.unit.test_host_bound import _fired

CUDA = torch.device("cuda")  # a device object only: nothing runs on it


class Event:
    """A timing event on a fake stream: recorded at the stream's clock, done once the
    test's ``now`` has passed it."""

    def __init__(self, clock: Clock) -> None:
        self.clock, self.at, self.stream = clock, None, None

    def record(self, stream=None) -> None:
        if self.clock.fail:
            raise RuntimeError("cudaErrorLaunchFailure (scripted)")
        self.stream = stream
        self.at = self.clock.device
        self.clock.device += self.clock.per_record

    def query(self) -> bool:
        self.clock.queries += 1
        return self.at is not None and self.at <= self.clock.now

    def elapsed_time(self, end: Event) -> float:
        assert self.query() and end.query(), "elapsed_time of an event not completed (CUDAEvent::elapsed_time)"
        return (end.at - self.at) * 1000.0


class Clock:
    def __init__(self) -> None:
        self.device = 0.0
        self.now = math.inf
        self.per_record = 0.002  # each copy: 2 ms of device time between its two events
        self.queries = 0
        self.fail = False
        self.streams: list = []

    def stream(self, device):
        self.streams.append(device)
        return ("stream", str(device))


class Dst:
    """A CUDA destination tensor (``copy_``'s first argument)."""

    device = CUDA


def make(clock: Clock, step: list[int]) -> tuple[CopyTimer, list[dict]]:
    sent: list[dict] = []
    timer = CopyTimer(lambda kind, **f: sent.append(f), lambda: step[0], event=lambda: Event(clock),
                      stream=clock.stream, capturing=lambda: False)
    return timer, sent


def copy(timer: CopyTimer, func, args, kwargs=None) -> None:
    kwargs = kwargs or {}
    mark = timer.start(func, args, kwargs) if func in timer.ops else None
    if mark is not None:
        timer.end(mark)


def test_which_copies_are_host_to_cuda():
    aten = torch.ops.aten
    cpu, pinned_like = torch.zeros(4, 3), torch.zeros(2)
    assert _h2d(aten._to_copy.default, (cpu,), {"device": CUDA})[0] is cpu
    assert _h2d(aten._to_copy.default, (cpu,), {"device": "cuda:0"})[0] is cpu
    assert _h2d(aten.copy_.default, (Dst(), pinned_like), {})[0] is pinned_like
    assert _h2d(aten.to.device, (cpu, CUDA), {})[0] is cpu
    assert _h2d(aten.to.other, (cpu, Dst()), {})[0] is cpu
    # not host-to-CUDA: a dtype change, a copy to the CPU or MPS, a device-to-device copy
    assert _h2d(aten._to_copy.default, (cpu,), {"dtype": torch.float64}) == (None, None)
    assert _h2d(aten._to_copy.default, (cpu,), {"device": torch.device("mps")}) == (None, None)
    assert _h2d(aten.copy_.default, (torch.zeros(2), cpu), {}) == (None, None)
    assert _h2d(aten.copy_.default, (Dst(), Dst()), {}) == (None, None)


def test_a_sampled_steps_copies_are_reported_once_their_events_completed():
    clock, step = Clock(), [5]
    timer, sent = make(clock, step)
    aten = torch.ops.aten
    x, y = torch.zeros(128, 3, 8, 8), torch.zeros(128, dtype=torch.long)
    clock.now = -1.0  # nothing completes yet
    copy(timer, aten._to_copy.default, (x,), {"device": CUDA, "non_blocking": True})
    copy(timer, aten._to_copy.default, (y,), {"device": CUDA, "non_blocking": True})
    assert clock.streams == [CUDA, CUDA]  # events on the destination's current stream
    step[0] = 9  # the next sampled step
    copy(timer, aten._to_copy.default, (x,), {"device": CUDA})
    assert sent == []  # step 5's events have not completed: not read (elapsed_time would refuse)
    clock.now = math.inf
    step[0] = 12
    copy(timer, aten._to_copy.default, (x,), {"device": CUDA})
    assert [s["step"] for s in sent] == [5, 9]
    five = sent[0]
    assert five["copies"] == 2 and five["bytes"] == x.nbytes + y.nbytes and five["pinned_bytes"] == 0
    assert abs(five["ms"] - 4.0) < 1e-6 and abs(five["pageable_ms"] - 4.0) < 1e-6
    timer.close(wait_s=0.0)
    assert [s["step"] for s in sent] == [5, 9, 12]  # at exit: the last sampled step's


def test_cpu_and_mps_copies_make_no_event():
    clock, step = Clock(), [3]
    timer, sent = make(clock, step)
    aten = torch.ops.aten
    copy(timer, aten._to_copy.default, (torch.zeros(3),), {"device": torch.device("mps")})
    copy(timer, aten.copy_.default, (torch.zeros(3), torch.ones(3)), {})
    timer.close(wait_s=0.0)
    assert clock.streams == [] and sent == []


def test_a_step_copying_thousands_of_tensors_times_the_first_ones():
    clock, step = Clock(), [2]
    timer, sent = make(clock, step)
    for _ in range(MAX_TIMED + 10):
        copy(timer, torch.ops.aten._to_copy.default, (torch.zeros(1),), {"device": CUDA})
    timer.close(wait_s=0.0)
    assert sent[0]["copies"] == MAX_TIMED and sent[0]["untimed"] == 10


def test_a_failing_event_switches_the_timer_off_silently():
    clock, step = Clock(), [2]
    timer, sent = make(clock, step)
    clock.fail = True
    copy(timer, torch.ops.aten._to_copy.default, (torch.zeros(4),), {"device": CUDA})
    assert timer.off
    clock.fail = False
    step[0] = 4
    copy(timer, torch.ops.aten._to_copy.default, (torch.zeros(4),), {"device": CUDA})
    timer.close(wait_s=0.0)
    assert sent == [] and clock.streams == [CUDA]  # nothing after the failure


def test_exit_waits_a_bounded_time_for_events_that_never_complete():
    clock, step = Clock(), [2]
    timer, sent = make(clock, step)
    copy(timer, torch.ops.aten._to_copy.default, (torch.zeros(4),), {"device": CUDA})
    clock.now = -1.0
    now, slept = [0.0], []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    timer.close(wait_s=0.05, sleep=sleep, clock=lambda: now[0])
    assert sent == [] and 0.05 <= sum(slept) < 0.06


class Acct:
    """The accountant as the mode sees it (probe/ops.py OpAccountant), recording."""

    _recording = True
    _bookkeeping = 0.0

    def __init__(self) -> None:
        self.ops: list[str] = []
        self._clock = __import__("time").perf_counter

    def _record(self, func, args, kwargs, out, dt) -> None:
        self.ops.append(str(func))

    def _fail(self, exc) -> None:
        raise AssertionError(exc)


def test_the_op_samplers_mode_hands_copies_to_the_timer_and_returns_what_the_op_returns():
    """Real ops through the real mode on the CPU: ``.to()`` and ``copy_`` reach it as
    ``_to_copy`` and ``copy_`` (the timer sees them, and leaves CPU ones alone); a fake
    op standing for a host-to-CUDA copy gets its two events."""
    clock, step = Clock(), [7]
    timer, sent = make(clock, step)
    seen: list[str] = []
    start = timer.start

    def spy(func, args, kwargs):
        seen.append(str(func))
        return start(func, args, kwargs)

    timer.start = spy  # type: ignore[method-assign]
    acct = Acct()
    OpMode.copy_timer = timer
    try:
        with OpMode(acct):
            a = torch.ones(3).to(torch.float64)
            b = torch.empty(3).copy_(torch.ones(3))
            c = torch.ones(2).to("meta")
        assert a.dtype == torch.float64 and b.tolist() == [1.0, 1.0, 1.0] and c.device.type == "meta"
        assert seen == ["aten._to_copy.default", "aten.copy_.default", "aten._to_copy.default"]
        assert clock.streams == []  # no CUDA destination: no event

        class H2D:  # a host-to-CUDA copy op, run on the CPU
            __name__ = "copy_.default"

            def __call__(self, dst, src):
                return "copied"

        fake = H2D()
        timer.ops = timer.ops | {fake}
        mode = OpMode(acct)
        out = mode.__torch_dispatch__(fake, (), (Dst(), torch.zeros(4)), {})
        assert out == "copied" and clock.streams == [CUDA]
    finally:
        OpMode.copy_timer = None
    timer.close(wait_s=0.0)
    assert sent[0]["step"] == 7 and sent[0]["bytes"] == 16 and sent[0]["copies"] == 1


def _session(copy_rows: list[dict]):
    session = build_session(env=LINUX_ENV, device="cuda", rows=step_rows([0.02] * 40))
    session.feed(events.decode(events.encode(events.KIND_HEALTH, 2.0, what="copies", loader=1, batches=16,
                                             pageable_batches=16, bytes_per_batch=24 * 1024**2,
                                             pinned_bytes_per_batch=0, pin_memory=False)))
    for row in copy_rows:
        session.feed(events.decode(events.encode(events.KIND_HEALTH, 3.0, what="copy_time", **row)))
    return session


def test_copy_time_facts_and_the_rules_evidence():
    rows = [dict(step=s, copies=2, untimed=0, bytes=25 * 1024**2, pinned_bytes=0, ms=ms, pageable_ms=ms)
            for s, ms in ((3, 4.0), (9, 5.0), (20, 6.0))]
    session = _session(rows)
    finding = _fired(session)["pageable-copies"]
    evidence = " ".join(finding.evidence.split())
    assert ("The host-to-device copies took 5.00 ms of GPU time per step, at 5.2 GB/s (the median step; "
            "op-sampled steps timed: 3).") in evidence  # 75 MiB in 15 ms
    assert "not the copies' time" not in evidence
    untimed = " ".join(_fired(_session([]))["pageable-copies"].evidence.split())
    assert "measured the bytes per batch, not the copies' time" in untimed and "GB/s" not in untimed
    assert session.health.copy_time[0].step == 3


def test_a_recording_without_copy_time_reads_as_before():
    """Older recordings (no ``copy_time`` event), damaged rows: no copy facts."""
    session = _session([{"step": "x", "bytes": 10, "ms": 1.0}, {"step": 2, "bytes": 10}])
    from mpsprofiler.diagnosis.facts import collect_facts

    facts = collect_facts(session)
    assert facts.get("copy_ms_per_step") is None and facts["copy_time_missing"] == "not_measured"
