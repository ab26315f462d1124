"""The workers' queuing, summed over workers that work at once, is not all in the
training's way (analyzers/loader_profile.LoaderFigures.worker_wait_split).

The sampler sums the run-queue time of every worker process (``runq_workers_s``). The
training waits for one batch at a time: where 4 workers compute at once on 2 cores, their
queuing overlaps, and the summed figure (tests/scripts_loader/parallel_workers.py
``--one-core --sleep-ms 0 --cpu-ms 2``: 29.2 ms a batch among them, against 9.5 ms of wall
time a batch) was put down whole against the training's blocked time, so the split said
every blocked millisecond was queuing and none was the workers' loading. Spread over the
workers measured at work at once (their CPU and queuing per batch over the wall time per
batch), the rest is the loading's."""

from __future__ import annotations

import pytest

from mpsprofiler.diagnosis.analyzers.loader_profile import LoaderFigures


def _figures(workers_cpu_ms: float, workers_runq_ms: float) -> LoaderFigures:
    """200 one-batch steps of 7.8 ms, 6.3 ms of each waited for the batch: 0.3 ms taking it
    in (the training's CPU), 0.1 ms queued for a core, 5.9 ms blocked."""
    n = 200
    return LoaderFigures(steps=n, batches=n, dur=7.8 * n / 1e3, wait=6.3 * n / 1e3, wait_cpu=0.3 * n / 1e3,
                         wait_runq=0.1 * n / 1e3, window_s=7.8 * n / 1e3, window_batches=float(n),
                         workers_cpu=workers_cpu_ms * n / 1e3, workers_runq=workers_runq_ms * n / 1e3)


def test_four_workers_queuing_at_once_are_not_summed_against_one_wait() -> None:
    fig = _figures(9.0, 12.0)  # 21 ms of CPU and queuing a batch among them in 7.8 ms: 2.7 at once
    assert fig.workers_at_once(4) == pytest.approx(21.0 / 7.8)
    queued, receiving, starved = fig.worker_wait_split(4) or (0.0, 0.0, 0.0)
    in_the_way = 12.0 / (21.0 / 7.8)  # 4.46 ms of the training's 5.9 blocked
    assert queued * 1e3 == pytest.approx(0.1 + in_the_way)
    assert receiving * 1e3 == pytest.approx(0.3)
    assert starved * 1e3 == pytest.approx(5.9 - in_the_way - 0.3)  # 1.1 ms: the loading's, not 0
    # at most the workers there are: 4 workers queued 40 ms a batch in 7.8 ms count as 4, not 6.4
    assert _figures(10.0, 40.0).workers_at_once(4) == 4.0


def test_workers_measured_at_work_one_at_a_time_keep_their_whole_queuing() -> None:
    """Workers that keep up (4.1 ms of CPU and queuing a batch in 7.8 ms: less than one at
    once), one worker, or workers not measured: the queuing stands whole, as before (the
    time a worker sleeps is not measured, so no more overlap is assumed than was seen)."""
    fig = _figures(3.5, 0.6)
    assert fig.workers_at_once(4) == 1.0
    assert fig.worker_wait_split(4) == fig.worker_wait_split(1)
    assert _figures(9.0, 12.0).workers_at_once(1) == 1.0
    unmeasured = _figures(9.0, 12.0)
    unmeasured.workers_cpu = None
    assert unmeasured.workers_at_once(4) == 1.0
