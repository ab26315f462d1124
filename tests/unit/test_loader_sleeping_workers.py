"""Workers that mostly sleep are not CPU-bound because other programs hold the cores
(analyzers/loader_profile.classify).

A sweep script zipped a labelled loader with one whose Dataset sleeps 0.8 ms a sample
(32 a batch); given num_workers=4 (`--set dataloader.2.num_workers=4`) beside other busy
programs on 2 cores, each worker took 31.2 ms a batch, 0.8 ms of it CPU and 0.3 ms queued
for a core. The CPU-demand check (0.8 ms of CPU a batch against 0.4 ms of training: 2.1
cores, none free) called it CPU work: "building batches needs more CPU than this machine
has", keep num_workers=4 and make each batch cheaper. Bare, 8 workers took the script
from 4.2 s to 3.5 s. The check now holds only where the workers' time is mostly CPU or
queueing for it; sleeping workers are ``waiting``, and CPU-bound ones stay ``cpu``."""

from __future__ import annotations

from mpsprofiler.diagnosis.analyzers.loader_profile import LoaderFigures, classify


def _four_workers(cpu_ms: float, runq_ms: float) -> LoaderFigures:
    """200 one-batch steps of 7.8 ms on 4 workers, 6.3 ms of each waited for the batch."""
    n = 200
    return LoaderFigures(steps=n, batches=n, dur=7.8 * n / 1e3, wait=6.3 * n / 1e3, wait_cpu=0.3 * n / 1e3,
                         wait_runq=0.1 * n / 1e3, window_s=7.8 * n / 1e3, window_batches=float(n),
                         workers_cpu=cpu_ms * n / 1e3, workers_runq=runq_ms * n / 1e3,
                         main_cpu=1.5 * n / 1e3)  # fmt: skip


def test_sleeping_workers_beside_busy_programs_are_waiting_not_cpu() -> None:
    assert classify(_four_workers(0.8, 0.3), 4, "Unlabelled", 32, 0.4e-3, 0) == "waiting"
    assert classify(_four_workers(0.8, 0.3), 4, "Unlabelled", 32, 0.4e-3, 1) == "waiting"


def test_computing_or_queued_workers_without_free_cores_stay_cpu() -> None:
    """The same check where the workers' 31.2 ms a batch are mostly CPU, or CPU and
    queueing for a core: more loading than the free cores can do."""
    assert classify(_four_workers(25.0, 2.0), 4, "Unlabelled", 32, 0.4e-3, 0) == "cpu"
    assert classify(_four_workers(9.0, 8.0), 4, "Unlabelled", 32, 0.4e-3, 0) == "cpu"
