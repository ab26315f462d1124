"""The DataLoader fetches' CPU clock, read at some fetches and estimated at the others
(``probe/cputime.py`` ``FetchClock``): which fetches are read, and that the sums the loader
findings read (CPU and run-queue seconds over many fetches) match reading every fetch."""

from __future__ import annotations

import random
import time

from mpsprofiler.probe import cputime
from mpsprofiler.probe.cputime import EXACT_FETCHES, LONG_FETCH, READ_EVERY, FetchClock, ThreadClock


class ScriptedClock:
    """A thread clock whose CPU and run-queue seconds the test moves; counts its reads."""

    def __init__(self) -> None:
        self.cpu_s = 0.0
        self.runq_s = 0.0
        self.reads = 0

    def read(self, now: float) -> tuple[float, float | None]:
        self.reads += 1
        return self.cpu_s, self.runq_s

    def cpu(self) -> float:
        self.reads += 1
        return self.cpu_s


def _fetch(fc: FetchClock, clock: ScriptedClock, now: float, wall: float, cpu_share: float,
           runq_share: float = 0.0) -> tuple[float, tuple[float, float | None], float, float]:
    started = fc.start(now)
    clock.cpu_s += wall * cpu_share
    clock.runq_s += wall * runq_share
    got = fc.end(started, now + wall, wall)
    return now + wall + 1e-3, got, wall * cpu_share, wall * runq_share


def test_every_clock_is_read_at_a_run_s_first_fetches() -> None:
    clock = ScriptedClock()
    fc = FetchClock(clock)  # type: ignore[arg-type]
    now = 0.0
    for _ in range(EXACT_FETCHES):
        now, (cpu, runq), true_cpu, true_runq = _fetch(fc, clock, now, 50e-6, 0.7, 0.1)
        assert abs(cpu - true_cpu) < 1e-12 and runq is not None and abs(runq - true_runq) < 1e-12
    assert clock.reads == 2 * EXACT_FETCHES


def test_past_them_short_fetches_are_read_one_in_read_every_and_long_ones_always_lead_to_a_read() -> None:
    clock = ScriptedClock()
    fc = FetchClock(clock)  # type: ignore[arg-type]
    now = 0.0
    for _ in range(EXACT_FETCHES):
        now, *_ = _fetch(fc, clock, now, 50e-6, 1.0)
    clock.reads = 0
    n = 64 * READ_EVERY
    for _ in range(n):
        now, *_ = _fetch(fc, clock, now, 50e-6, 1.0)
    assert clock.reads == 2 * n // READ_EVERY
    # a long fetch: the next one is read whatever its count
    clock.reads = 0
    now, *_ = _fetch(fc, clock, now, 2 * LONG_FETCH, 0.0)
    before = clock.reads
    now, *_ = _fetch(fc, clock, now, 50e-6, 1.0)
    assert clock.reads == before + 2


def test_the_estimated_sums_match_the_true_ones_where_short_and_long_fetches_differ() -> None:
    """Short fetches computing (a batch ready in a worker's queue, unpickled: CPU), long ones
    waiting (the queue empty: asleep), in runs as a starved loader makes them. Estimating the
    short ones from every fetch read would mix the long ones' ratio in; the estimate reads
    the short fetches' own kind."""
    rng = random.Random(3)
    clock = ScriptedClock()
    fc = FetchClock(clock)  # type: ignore[arg-type]
    now = 0.0
    got_cpu = true_cpu = got_runq = true_runq = 0.0
    long_run = False
    for _ in range(20_000):
        if rng.random() < 0.05:
            long_run = not long_run
        if long_run:
            wall, share, rq = rng.uniform(0.5e-3, 5e-3), rng.uniform(0.0, 0.1), 0.0
        else:
            wall, share, rq = rng.uniform(20e-6, 150e-6), rng.uniform(0.8, 1.0), rng.uniform(0.0, 0.2)
        now, (cpu, runq), c, r = _fetch(fc, clock, now, wall, share, rq)
        assert 0.0 <= cpu <= wall and runq is not None
        got_cpu += cpu
        true_cpu += c
        got_runq += runq
        true_runq += r
    assert abs(got_cpu - true_cpu) < 0.02 * true_cpu
    assert abs(got_runq - true_runq) < 0.1 * true_runq
    assert clock.reads < 0.6 * 2 * 20_000  # most short fetches were estimated


def test_a_missing_run_queue_reading_makes_the_estimates_unknown_not_zero() -> None:
    class NoRunQueue(ScriptedClock):
        def read(self, now: float) -> tuple[float, float | None]:
            self.reads += 1
            return self.cpu_s, None

    clock = NoRunQueue()
    fc = FetchClock(clock)  # type: ignore[arg-type]
    now = 0.0
    runqs = []
    for _ in range(EXACT_FETCHES + 4 * READ_EVERY):
        now, (cpu, runq), *_ = _fetch(fc, clock, now, 50e-6, 1.0)
        runqs.append(runq)
    assert all(r is None for r in runqs)


def test_real_fetches_on_this_thread_sum_to_their_cpu_time() -> None:
    """The real clock: fetches that compute (a busy loop) and fetches that sleep, as a
    loader's ``__next__`` does, past the exact first fetches; the sums of the read and
    estimated CPU seconds against ``time.thread_time`` around every fetch."""
    fc = FetchClock(ThreadClock())
    rng = random.Random(5)
    got = true = 0.0
    perf, thread = time.perf_counter, time.thread_time
    for i in range(EXACT_FETCHES + 1200):
        sleep = rng.random() < 0.3
        t0, c0 = perf(), thread()
        started = fc.start(t0)
        if sleep:
            time.sleep(300e-6)
        else:
            end = perf() + 40e-6
            while perf() < end:
                pass
        now = perf()
        cpu, _ = fc.end(started, now, now - t0)
        c1 = thread()
        if i >= EXACT_FETCHES:
            got += cpu
            true += c1 - c0
    assert abs(got - true) < 0.15 * true, (got, true)
    assert cputime.READ_EVERY > 1
