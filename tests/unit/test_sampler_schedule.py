"""The memory sampler's schedule on the channel's thread (probe/sampler.py ``tick``).

The sampler has no thread of its own: it runs at the channel thread's wakes when a sample
is due. Whatever the channel's interval (a quarter second under the TUI, half a second
headless), samples come every ``FAST_INTERVAL`` and after ``SLOW_AFTER`` every
``SLOW_INTERVAL``, with no wake skipped for a wake that comes a hair early; an error stops
the sampling and is reported once; a stopped sampler samples no more.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from itertools import pairwise
from typing import Any

import pytest

from mpsprofiler.probe import channel as channel_mod
from mpsprofiler.probe import sampler as sampler_mod
from mpsprofiler.probe.sampler import MemorySampler


class FakeHost:
    """The channel's side a sampler sees: its interval, its tasks and its early wakes."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.tasks: list[Callable[[], None]] = []
        self.soon = 0

    def beside(self, task: Callable[[], None]) -> None:
        self.tasks.append(task)

    def flush_soon(self) -> None:
        self.soon += 1


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _sampler(clock: Clock, before: Callable[[], None] | None = None) -> tuple[MemorySampler, list[Any], list[BaseException]]:
    sent: list[Any] = []
    errors: list[BaseException] = []
    sampler = MemorySampler(lambda kind, **fields: sent.append(clock.now), lambda: None,  # type: ignore[arg-type,return-value]
                            clock, errors.append, before_sample=before)
    return sampler, sent, errors


def _wakes(host: FakeHost, clock: Clock, until: float, jitter: float = 0.0) -> None:
    """Wake the host every ``interval`` (each wake ``jitter`` early, as a timed wait may
    return) up to ``until`` seconds after the clock's start."""
    end = clock.now + until
    n = 0
    while clock.now < end:
        n += 1
        clock.now = 100.0 + n * host.interval - jitter
        for task in host.tasks:
            task()


@pytest.mark.parametrize("interval", [channel_mod.INTERVAL, channel_mod.HEADLESS_INTERVAL])
@pytest.mark.parametrize("jitter", [0.0, 1e-4])
def test_samples_come_every_fast_interval_whatever_the_channels_interval(interval: float, jitter: float) -> None:
    clock = Clock()
    host = FakeHost(interval)
    sampler, sent, errors = _sampler(clock)
    sampler.start(host)  # type: ignore[arg-type]
    assert host.soon == 1  # the first sample at once: the host is woken for it
    host.tasks[0]()
    _wakes(host, clock, 10.0, jitter)
    gaps = {round(b - a, 3) for a, b in pairwise(sent)}
    assert gaps == {sampler_mod.FAST_INTERVAL}, (interval, jitter, sorted(gaps))
    assert len(sent) >= 1 + int(10.0 / sampler_mod.FAST_INTERVAL) and not errors


def test_after_slow_after_samples_come_every_slow_interval() -> None:
    clock = Clock()
    host = FakeHost(channel_mod.INTERVAL)
    sampler, sent, _ = _sampler(clock)
    sampler.start(host)  # type: ignore[arg-type]
    _wakes(host, clock, sampler_mod.SLOW_AFTER + 60.0, jitter=1e-4)
    late = [t for t in sent if t - 100.0 > sampler_mod.SLOW_AFTER + 1]
    gaps = {round(b - a, 3) for a, b in pairwise(late)}
    assert gaps == {sampler_mod.SLOW_INTERVAL}, sorted(gaps)


def test_an_error_is_reported_once_and_stops_the_sampling() -> None:
    clock = Clock()
    host = FakeHost(channel_mod.HEADLESS_INTERVAL)
    calls: list[int] = []

    def fail() -> None:
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("injected")

    sampler, sent, errors = _sampler(clock, fail)
    sampler.start(host)  # type: ignore[arg-type]
    _wakes(host, clock, 5.0)
    assert len(sent) == 2 and len(calls) == 3
    assert [str(e) for e in errors] == ["injected"]


def test_a_stopped_sampler_samples_no_more_but_its_final_sample_still_can() -> None:
    clock = Clock()
    host = FakeHost(channel_mod.HEADLESS_INTERVAL)
    sampler, sent, _ = _sampler(clock)
    sampler.start(host)  # type: ignore[arg-type]
    _wakes(host, clock, 2.0)
    count = len(sent)
    sampler.stop()
    _wakes(host, clock, 2.0)
    assert len(sent) == count
    sampler.sample()  # what Probe.close takes at the end
    assert len(sent) == count + 1


def test_the_channel_runs_its_tasks_before_the_flush_and_drops_one_that_raises() -> None:
    read, write = os.pipe()
    chan = channel_mod.Channel(write, interval=0.01, inline=False)  # its thread (inline: tests/unit/test_channel_inline.py)
    try:
        ran: list[str] = []

        def good() -> None:
            ran.append("good")
            chan.send(b'{"k":"x"}\n')

        def bad() -> None:
            ran.append("bad")
            raise RuntimeError("a task's bug")

        chan.beside(bad)
        chan.beside(good)
        data = b""
        os.set_blocking(read, True)
        while data.count(b"\n") < 3:
            data += os.read(read, 1 << 16)
        assert ran.count("bad") == 1 and ran.count("good") >= 3  # dropped, and the flushes go on
    finally:
        chan.close(timeout=0.5)
        os.close(read)
