"""A loader in the training process on a machine other programs keep busy (num_workers=0).

Figures recorded under ``mpsprof run`` on a 2-core Linux machine beside 10 busy loops
(load average ~12): the time a fetch of an in-memory dataset spends neither on its CPU
nor in the run queue is the machine's, not I/O, and the loader must not be sized for
waiting; a loader that really waits (sleep, I/O) keeps its stall and its workers.
"""

from __future__ import annotations

from mpsprofiler.diagnosis.analyzers.loader_advice import advise
from mpsprofiler.diagnosis.analyzers.loader_profile import LoaderFigures, classify


def _fig(wait_ms: float, cpu_ms: float, runq_ms: float, step_ms: float) -> LoaderFigures:
    """100 one-batch steps: wait, its CPU and run-queue parts, and the step, in ms."""
    n = 100
    return LoaderFigures(steps=n, batches=n, dur=step_ms * n / 1e3, wait=wait_ms * n / 1e3,
                         wait_cpu=cpu_ms * n / 1e3, wait_runq=runq_ms * n / 1e3, batch_tensors=2)  # fmt: skip


def test_an_in_memory_dataset_on_a_busy_machine_is_contention_not_waiting():
    """accelerate over a TensorDataset at load ~12: 8.6 ms waited a batch, 0.6 ms of CPU, 2.4 ms
    queued; the other 5.6 ms were read as I/O ("waiting") and the loader was told to try
    num_workers=1. And tests' plain-torch TensorDataset loop beside 10 busy loops: 22.2 ms
    waited of a 27.5 ms step, 0.47 ms of CPU, 19.9 ms queued, 2.2 ms of training CPU a batch
    (critical stall, 8 workers before)."""
    accelerate = _fig(8.6, 0.6, 2.4, 27.7)
    assert classify(accelerate, 0, "TensorDataset", 64, 19.1e-3, 0) == "contention"
    loop = _fig(22.2, 0.47, 19.9, 27.5)
    assert classify(loop, 0, "TensorDataset", 64, 2.19e-3, 0) == "contention"
    said = advise(loop, "contention", 0, 2.19e-3, 1, 2, "physical", 64, None, None, 2)
    assert said["suggested_num_workers"] == 0 and not said["num_workers_helps"], said


def test_a_sleeping_loader_on_a_busy_machine_keeps_its_stall():
    """The same figures but for a Dataset whose fetch is blocked off the run queue for longer
    than the stall's lower band (10% of the step): that is waiting (sleep, I/O), workers
    that wait need no core. The in-memory name alone turns the blocked part into the machine's."""
    # recorded beside the same 10 busy loops: a Dataset sleeping 0.2 ms a sample, 64 a batch,
    # waited 68.6 ms of a 73.9 ms step: 1.3 ms of CPU, 50.5 ms queued, 16.8 ms blocked
    recorded = _fig(68.6, 1.34, 50.48, 73.9)
    assert classify(recorded, 0, "ListDS", 64, 2.6e-3, 0) == "waiting"
    said = advise(recorded, "waiting", 0, 2.6e-3, 1, 2, "physical", 64, None, None, 2)
    assert said["num_workers_helps"] and said["suggested_num_workers"] >= 1, said
    sleeps = _fig(20.0, 0.5, 6.0, 30.0)  # 13.5 ms blocked of a 30 ms step
    assert classify(sleeps, 0, "SlowReads", 8, 10e-3, 0) == "waiting"
    assert classify(sleeps, 0, "TensorDataset", 8, 10e-3, 0) == "contention"
    # more queued than slept, but the sleep alone is 24% of the step: still a stall to size
    queued_more = _fig(30.0, 0.5, 20.0, 40.0)
    assert classify(queued_more, 0, "SlowReads", 8, 10e-3, 0) == "waiting"
    # a list of tensors beside 10 busy loops: 29.5 ms waited of a 38.7 ms step, 0.43 ms of
    # CPU, 23.8 ms queued; the 5.3 ms rest, less the ~2 ms a worker's batch takes to come
    # in, is under 10% of the step: the machine's queue, not a loader to size
    assert classify(_fig(29.5, 0.43, 23.75, 38.7), 0, "ListDS", 64, 2.7e-3, 0) == "contention"


def test_loading_that_computes_beside_busy_programs_stays_cpu_work():
    """8 ms of CPU a batch that also queued: a worker takes its share of the cores from the
    other programs (tests/scripts_loader/cpu_workers.py), so it is no contention."""
    assert classify(_fig(14.0, 8.0, 5.0, 24.0), 0, "Synth", 8, 10e-3, 0) == "cpu"


def test_a_vm_s_stolen_time_is_the_machine_s_not_the_loader_s():
    """On a VM the hypervisor's stolen time is neither the thread's CPU time nor its wait in
    the guest's run queue, so a fetch read it as "blocked" (I/O). With a quarter of the
    CPU time stolen (``steal`` in /proc/stat), a custom loader that computes little and
    queued most of its wait is the machine's; without steal the same figures are waiting."""
    fig = _fig(20.0, 0.4, 11.0, 30.0)  # 8.6 ms blocked of a 30 ms step
    assert classify(fig, 0, "ListDS", 64, 2e-3, 0) == "waiting"
    fig.machine_steal = 0.25  # 5 ms of the 20 ms wait stolen: 3.6 ms left, less the handover
    assert classify(fig, 0, "ListDS", 64, 2e-3, 0) == "contention"


def test_the_sampler_reads_the_stolen_share_of_the_cpu_time():
    """psutil.cpu_times() on Linux carries ``steal`` (and ``guest``, already in ``user``)."""
    from collections import namedtuple

    from mpsprofiler.probe.sampler import _cpu_total, _steal_share

    Times = namedtuple("Times", "user nice system idle iowait irq softirq steal guest guest_nice")
    a = Times(10, 0, 5, 80, 1, 0, 0, 4, 0, 0)
    b = Times(30, 0, 10, 120, 1, 0, 0, 24, 10, 0)  # 95 s more, 10 of them guest (in user): 85
    assert _steal_share(a, b, _cpu_total(a, b)) == round(20 / 85, 4)
    Mac = namedtuple("Mac", "user nice system idle")
    mac_a, mac_b = Mac(1, 0, 1, 1), Mac(2, 0, 2, 2)
    assert _steal_share(mac_a, mac_b, _cpu_total(mac_a, mac_b)) is None


def test_contention_names_the_fetch_s_time_off_its_cpu():
    """accelerate's loader over a TensorDataset beside 8 busy loops: 19.7 ms a fetch, 0.5 ms
    of CPU and no run-queue reading. The reason said "about 0.0 ms ... waiting for a free CPU
    core" of a fetch classed as the machine's; it names the 19.2 ms off its CPU."""
    from tests.unit.test_reason_texts import reason_text

    fig = _fig(19.7, 0.5, 0.0, 26.5)
    fig.wait_runq = None
    assert classify(fig, 0, "TensorDataset", 64, 2.0e-3, 0) == "contention"
    said = advise(fig, "contention", 0, 2.0e-3, 1, 2, "physical", 64, None, None, 2)
    assert "about 19.2 ms off its CPU, ready to run but waiting for a free CPU core" in \
        reason_text(said, bound="contention"), said
