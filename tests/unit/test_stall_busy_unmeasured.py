"""A loader with workers whose CPU time was not measured (a short run: the workers' CPU
totals are read every 0.5 s) on a machine other programs keep busy: its wait is no stall
to warn about, critical or not.

Why: an unseen script (an IterableDataset sharded over 2 workers, 200 steps of ~2 ms) on a
2-core machine where other programs held 1.4 cores waited 72% of its time for data and
was told "The DataLoader starves training" (critical, more workers) in one run of four;
in the other three the workers' CPU time was measured and the wait was the busy CPU
(dataloader-cpu-contention, info). Bare, its workers build a batch in 0.27 ms of CPU
against 0.22 ms of training: the machine, not the loader. Where mpsprof cannot tell the
loading from the machine and the machine was busy, the run's own `other-programs-busy`
finding says so; on a quiet machine the same figures still warn."""

from __future__ import annotations

from mpsprofiler import events
from mpsprofiler.diagnosis.diagnose import diagnose
from tests.unit.test_analyzers import GIB, build_session, facts_of, loader, step_rows

STALLS = {"dataloader-stall", "dataloader-stall-critical"}


def _run(sys_busy: float):
    """2 workers, 30 ms of each 40 ms step waiting for data, no CPU figure of the workers;
    the training process keeps half a core busy, the machine ``sys_busy`` of its 2."""
    rows = step_rows([0.04] * 100, waits=[0.03] * 100)
    mem = [events.encode(events.KIND_MEM, 1.0 + k * 0.5, rss=GIB, rss_children=0, workers=2, sys_available=12 * GIB,
                         sys_total=16 * GIB, swap_used=0, cpu_pct=50.0, cpu_main_s=k * 0.25,
                         sys_busy=sys_busy) for k in range(9)]  # fmt: skip
    return build_session(loaders=[loader(num_workers=2, prefetch_factor=2, len=1000)], rows=rows, mem=mem)


def test_an_unmeasured_wait_on_a_busy_machine_is_no_stall() -> None:
    busy = _run(0.95)
    f = facts_of(busy)
    assert f["loader_bound"] == "unknown" and f["others_busy_share"] >= 0.5, f
    rules = {x.rule for x in diagnose(busy).findings}
    assert not STALLS & rules, rules
    assert "other-programs-busy" in rules, rules


def test_the_same_wait_on_a_quiet_machine_is_still_a_stall() -> None:
    quiet = _run(0.3)
    f = facts_of(quiet)
    assert f["loader_bound"] == "unknown" and f["others_busy_share"] < 0.25, f
    assert "dataloader-stall-critical" in {x.rule for x in diagnose(quiet).findings}
    # no CPU samples at all (an older recording): nothing tells the machine was busy
    unsampled = build_session(loaders=[loader(num_workers=2, prefetch_factor=2, len=1000)],
                              rows=step_rows([0.04] * 100, waits=[0.03] * 100))
    assert facts_of(unsampled)["others_busy_share"] is None
    assert "dataloader-stall-critical" in {x.rule for x in diagnose(unsampled).findings}
