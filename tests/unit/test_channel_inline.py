"""The event channel without a thread (probe/channel.py's inline wakes, probe/inline_wakes.py).

A process that started no thread gets none of the probe's: the channel's wakes run on the
training thread when due, at the step boundary (timed apart from the steps) and from the
garbage collector outside the steps; a process that started a thread meanwhile gets the
channel's thread at the next wake. The pytest process may have threads of its own (xdist),
so the glibc flag itself is read in a fresh interpreter, and elsewhere it is patched.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from helpers import child_env
from mpsprofiler.devices.cpu import CpuBackend
from mpsprofiler.events.step_rows import as_read
from mpsprofiler.probe import channel as channel_mod
from mpsprofiler.probe import inline_wakes
from mpsprofiler.probe.steps import StepTracker


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read, write = os.pipe()
    os.set_blocking(read, False)
    yield read, write
    os.close(read)


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 1 << 20)
    except BlockingIOError:
        return b""


def _single(monkeypatch: pytest.MonkeyPatch, value: bool) -> None:
    monkeypatch.setattr(channel_mod, "single_threaded", lambda: value)


def test_an_inline_channel_starts_no_thread_and_writes_at_its_wakes(monkeypatch: pytest.MonkeyPatch,
                                                                    pipe: tuple[int, int]) -> None:
    _single(monkeypatch, True)
    read, write = pipe
    before = threading.active_count()
    chan = channel_mod.Channel(write, interval=0.05, inline=True)
    try:
        assert chan.inline and threading.active_count() == before
        ran: list[str] = []
        chan.beside(lambda: (ran.append("task"), chan.send(b'{"k":"mem"}\n')))
        chan.on_flush(lambda: ran.append("drain"))
        chan.send(b'{"k":"hello"}\n')
        assert _read(read) == b""  # nothing goes out between wakes
        after = chan.tick()
        assert ran == ["task", "drain"]  # the task's event goes out in the same wake
        assert _read(read) == b'{"k":"hello"}\n{"k":"mem"}\n'
        assert after <= chan.due <= time.perf_counter() + 0.05
        chan.flush_soon()
        assert chan.due == float("-inf")  # the next hook wakes it
        assert threading.active_count() == before
    finally:
        chan.close(timeout=0.2)


def test_a_wake_that_finds_a_thread_started_gives_the_channel_its_thread(monkeypatch: pytest.MonkeyPatch,
                                                                         pipe: tuple[int, int]) -> None:
    read, write = pipe
    _single(monkeypatch, True)
    chan = channel_mod.Channel(write, interval=0.01, inline=True)
    try:
        _single(monkeypatch, False)
        chan.tick()
        assert not chan.inline and chan.due == float("inf")
        assert chan.threaded_reason.startswith("the process has")
        chan.send(b'{"k":"x"}\n')
        deadline = time.monotonic() + 10
        data = b""
        while b"\n" not in data and time.monotonic() < deadline:  # written by the thread, no tick
            data += _read(read)
            time.sleep(0.01)
        assert data == b'{"k":"x"}\n'
    finally:
        chan.close(timeout=0.2)


def test_a_wake_is_never_reentered_and_never_runs_in_a_forked_child(monkeypatch: pytest.MonkeyPatch,
                                                                    pipe: tuple[int, int]) -> None:
    _single(monkeypatch, True)
    read, write = pipe
    chan = channel_mod.Channel(write, interval=0.01, inline=True)
    try:
        inner: list[float] = []
        chan.beside(lambda: inner.append(chan.tick()))  # a hook firing inside a wake
        chan.send(b'{"k":"before-fork"}\n')
        pid = os.fork()
        if pid == 0:  # the child: the buffered line is the parent's, and so is the pipe
            chan.send(b'{"k":"child"}\n')
            chan.tick()
            os._exit(0)
        os.waitpid(pid, 0)
        assert _read(read) == b""
        chan.tick()
        assert len(inner) == 1 and _read(read) == b'{"k":"before-fork"}\n'
    finally:
        chan.close(timeout=0.2)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's flag")
def test_single_threaded_is_glibcs_flag_which_a_thread_clears_for_good() -> None:
    code = ("import threading\n"
            "from mpsprofiler.probe.channel import single_threaded, threaded_because\n"
            "print(single_threaded(), repr(threaded_because()))\n"
            "t = threading.Thread(target=lambda: None); t.start(); t.join()\n"
            "print(single_threaded(), repr(threaded_because()))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=child_env(MPSPROF_CHANNEL_THREAD="0"), timeout=60).stdout.splitlines()
    assert out[0] == "True ''"
    # the thread has ended, and malloc still locks: no inline wakes
    assert out[1].startswith("False 'the process has ")


class _SlowChannel:
    """A channel whose wakes take 20 ms (of ``clock``, when given), due at every step."""

    def __init__(self, clock: list[float] | None = None) -> None:
        self.due = 0.0
        self.interval = 0.0
        self.ticks = 0
        self._clock = clock

    def tick(self) -> float:
        self.ticks += 1
        if self._clock is None:
            time.sleep(0.02)
            return time.perf_counter()
        self._clock[0] += 0.02
        return self._clock[0]

    def busy(self) -> bool:
        return False

    def when_threaded(self, fn: Any) -> None:
        self.threaded = fn


def test_the_wake_at_the_step_boundary_is_not_the_next_steps_time() -> None:
    now = [100.0]
    sent: list[dict[str, Any]] = []
    tracker = StepTracker(lambda kind, **fields: sent.append(as_read(fields)), CpuBackend(), lambda: now[0])
    tracker.inline_channel = _SlowChannel(now)
    for _ in range(4):
        now[0] += 0.002  # a 2 ms step
        tracker.manual_step()
    tracker.drain()
    durations = [d for event in sent for d in event["dur"]]
    assert tracker.inline_channel.ticks == 4
    assert durations == [pytest.approx(0.002)] * 4  # 0.022 each with the wake in them


def test_the_boundarys_wake_where_a_step_closes_late_is_not_taken_off_the_next_step() -> None:
    """A one-optimizer loop: step 0 is closed at the second optimizer step (the cycle is
    learnt there, at ``_last_opt_time``), and that same call closes step 1 at its own
    time, read before step 0's close woke the channel. The wake moved step 1's start past
    its end: -0.4 ms for a 0.5 ms step in every run of a 12-step loop (a step missing from
    the trace). Every step is its own length now."""
    now = [100.0]
    sent: list[dict[str, Any]] = []
    tracker = StepTracker(lambda kind, **fields: sent.append(as_read(fields)), CpuBackend(), lambda: now[0])
    tracker.inline_channel = _SlowChannel(now)
    opt = SimpleNamespace(param_groups=[{"params": [object()]}])
    for _ in range(5):
        now[0] += 0.002
        tracker.on_optimizer_step(opt)
    tracker.drain()
    durations = [d for event in sent for d in event["dur"]]
    assert durations == [pytest.approx(0.002)] * 5, durations  # the 20 ms wakes in none of them


def test_a_wake_after_a_steps_end_but_before_its_close_is_not_taken_off_that_step() -> None:
    """Two optimizers (a GAN): a step ends at its last optimizer step and is closed at the
    next iteration's first, and a wake in between (the collector during the next forward
    pass) moved the start of the step already over: a negative duration, a step missing
    from the trace and op accounting fed a negative time. The wake is the next step's."""
    now = [100.0]
    sent: list[dict[str, Any]] = []
    tracker = StepTracker(lambda kind, **fields: sent.append(as_read(fields)), CpuBackend(), lambda: now[0])
    g, d = SimpleNamespace(param_groups=[{"params": [object()]}]), SimpleNamespace(param_groups=[{"params": [object()]}])
    for _ in range(6):
        now[0] += 0.001
        tracker.on_optimizer_step(d)
        now[0] += 0.001
        tracker.on_optimizer_step(g)
        now[0] += 0.001  # the next iteration's forward pass: a 20 ms wake in it
        tracker.moved_by_wake(now[0], 0.02)
        now[0] += 0.021
    tracker.drain()
    durations = [d for event in sent for d in event["dur"]]
    # step 0 ends at its last optimizer step, known as the cycle's end only at the next
    # iteration: the wake after it is step 1's, taken off it as off the later ones
    assert durations == [pytest.approx(0.002)] + [pytest.approx(0.004)] * 5, durations


@pytest.mark.skipif(sys.gettrace() is not None, reason="a tracer (coverage, a debugger) is in use")
def test_the_wakes_outside_the_steps_skip_a_busy_probe_and_keep_ctrl_c() -> None:
    tracker = StepTracker(lambda kind, **fields: None, CpuBackend(), time.perf_counter)
    chan = _SlowChannel()
    chan.due = float("-inf")
    busy: list[bool] = [False]
    uninstall = inline_wakes.install(chan, tracker, lambda: busy[0])
    try:
        start = tracker._start
        gc.collect()
        assert chan.ticks == 1
        assert tracker._start - start >= 0.02  # the step in progress does not count the wake
        busy[0] = True  # a lock of the probe's is held: the wake would wait for it forever
        gc.collect()
        for listener in tracker.fetch_listeners:
            listener()
        assert chan.ticks == 1
        busy[0] = False
        elsewhere = threading.Thread(target=lambda: [listener() for listener in tracker.fetch_listeners])
        elsewhere.start()
        elsewhere.join()
        assert chan.ticks == 1  # a thread the script started: the training thread's next wake goes threaded
        # an evaluation's loop frees what it allocates (no collection): its fetches wake it
        for listener in tracker.fetch_listeners:
            listener()
        assert chan.ticks == 2
        chan.threaded()  # the channel started its thread: the fetches' call goes
        assert not tracker.fetch_listeners

        def interrupted() -> float:
            raise KeyboardInterrupt

        chan.tick = interrupted  # type: ignore[method-assign]
        with pytest.raises(KeyboardInterrupt):
            gc.collect()  # the collector swallows it: raised again right after
            for _ in range(10_000):
                pass
    finally:
        uninstall()
    assert not inline_wakes.raise_in_script(KeyboardInterrupt(), None)
    other: list[str] = []
    gc.callbacks.append(lambda phase, info: other.append(phase))  # another library's callback
    try:
        with pytest.raises(KeyboardInterrupt):
            # a collection in the same line: the other callback is a call, not a line of this
            # frame, so it runs untouched (raised there, the collector would drop it)
            assert inline_wakes.raise_in_script(KeyboardInterrupt(), sys._getframe()) and gc.collect() >= 0
            raise AssertionError("the next line raises it")
    finally:
        gc.callbacks.pop()
    assert other == ["start", "stop"] and sys.gettrace() is None


class _Lock:
    """A lock that records an acquire while held (a real one would wait forever)."""

    def __init__(self) -> None:
        self.held = False
        self.waited = 0

    def locked(self) -> bool:
        return self.held

    def __enter__(self) -> None:
        if self.held:
            self.waited += 1
            raise RuntimeError("would wait forever")
        self.held = True

    def __exit__(self, *exc: object) -> None:
        self.held = False


def test_a_probes_collector_wake_waits_for_none_of_its_locks(monkeypatch: pytest.MonkeyPatch) -> None:
    """A real probe with an inline channel: a collection while the step tracker's lock is
    held (its drain, the exit's fold) makes no wake; once free, a wake sends the steps."""
    from mpsprofiler.probe.probe import Probe

    _single(monkeypatch, True)
    read, write = os.pipe()
    os.set_blocking(read, False)
    probe = Probe(channel_mod.Channel(write, inline=True), {"no_memory": True})
    probe.install()
    try:
        assert probe.tracker.inline_channel is probe.channel
        lock = probe.tracker._lock = _Lock()  # type: ignore[assignment]
        probe.channel.due = float("inf")
        probe.tracker.manual_step()  # (no wake at its boundary)
        probe.channel.due = float("-inf")
        with lock:
            gc.collect()
        assert lock.waited == 0
        gc.collect()
        assert b'"k":"steps"' in _read(read)
    finally:
        probe.close()
        for undo in reversed(probe._uninstallers):
            undo()
        os.close(read)
    assert probe.tracker.inline_channel is None
