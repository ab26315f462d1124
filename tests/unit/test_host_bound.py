"""The host-bound finding from recorded figures: device busy time per step (the probe's
``health`` events), op accounting, memory; never when the device is busy or the
DataLoader is the cause. The figures are those the fake device of test_device_time
yields for a launch-bound loop (0.4 ms of kernels in a 4 ms step, 200 ops)."""

from __future__ import annotations

from typing import Any

from mpsprofiler import events
from mpsprofiler.diagnosis import diagnose
from mpsprofiler.session.session import Session
from tests.unit.test_analyzers import LINUX_ENV, build_session, loader, mem_event, step_rows

GIB, MIB = 1024**3, 1024**2


def _session(busy_s: float, step_s: float, *, waits: float = 0.0, device: str = "cuda", timed: int = 4,
             params: int = 50_000, durs: list[float] | None = None, timed_steps: list[int] | None = None,
             loaders: tuple[dict[str, Any], ...] = (), syncs: bool = True, torch: str | None = None) -> Session:
    durs = durs or [step_s] * 60
    rows = step_rows(durs, waits=[waits] * len(durs), alloc=[200 * MIB] * len(durs))
    dev = {"allocated": 200 * MIB, "cached": 400 * MIB, "peak": 260 * MIB, "total": 80 * GIB, "limit": 80 * GIB}
    env = dict(LINUX_ENV, torch=torch) if torch else LINUX_ENV
    session = build_session(env=env, device=device, rows=rows, model={"parameters": params},
                            mem=[mem_event(rows[-1][1], GIB, device=dev)], loaders=loaders)
    extra: list[bytes] = []
    for k, step in enumerate(timed_steps if timed_steps is not None else [10 * k + 6 for k in range(timed)]):
        extra.append(events.encode(events.KIND_HEALTH, 3.0 + k, what="device_time", step=step,
                                   busy_s=busy_s, host_s=step_s, hold_s=0.006, valid=True, rearmed=False))
    ops: dict[str, Any] = {"step": 5, "host_s": 3 * step_s, "ops": [
        {"op": "aten::addmm", "calls": 120, "host_s": 0.002, "devices": [device], "module": "net.0 (Linear)",
         "dtypes": ["float32"], "file": "/w/train.py", "line": 12},
        {"op": "aten::relu", "calls": 80, "host_s": 0.001, "devices": [device], "module": "net.1 (ReLU)",
         "dtypes": ["float32"], "file": "/w/train.py", "line": 12}],
        "syncs": [{"kind": "item", "op": "aten::_local_scalar_dense", "file": "/w/train.py", "line": 19,
                   "code": "total += loss.item()", "calls": 1, "module": ""}] if syncs else []}
    extra.append(events.encode(events.KIND_OPS, 2.0, **ops))
    session.feed_many(events.decode(line) for line in extra)
    return session


def _fired(session: Session) -> dict[str, Any]:
    diagnosis = diagnose(session)
    assert diagnosis.facts["analyzer_errors"] == []
    return {f.rule: f for f in diagnosis.findings}


def test_launch_bound_cuda_run_is_host_bound_with_its_figures():
    found = _fired(_session(0.0004, 0.004))
    finding = found["host-bound"]
    assert finding.title == "The cuda device is busy 10% of each step: the host cannot feed it"
    assert "0.40 ms of a 4.00 ms step" in finding.evidence and "200 ops" in finding.evidence
    assert "2.0 µs on one, the host 20.0 µs" in finding.evidence
    assert "train.py:19 `total += loss.item()` (1 per step)" in finding.evidence
    assert 'mode="reduce-overhead"' in finding.fix and "CUDA graph" in finding.fix
    # 0.8 / 0.1 -> 8x the batch: 200 MiB held + 8 x 60 MiB of activations
    fix = " ".join(finding.fix.split())
    assert "About 8x the batch fits" in fix and "peak tensor memory would be about 680 MiB of 81,920 MiB" in fix
    assert "if step % 50 == 0: # train.py:19, once per 50 steps total += loss.item()" in fix
    assert "DataLoader" not in fix and "mpsprof bench" not in fix  # no loader in this run; not a Mac


def test_mps_gets_no_cuda_graphs_and_the_cpu_measured_with_bench():
    finding = _fired(_session(0.0004, 0.004, device="mps", torch="2.8.0"))["host-bound"]
    fix = " ".join(finding.fix.split())
    assert "reduce-overhead" not in fix and "CUDA graph" not in fix
    assert "model = torch.compile(model) " in fix
    # torch.compile fails on MPS before 2.8 (MPSInductor, pytorch/pytorch#157957): no advice there
    old = " ".join(_fired(_session(0.0004, 0.004, device="mps", torch="2.7.1"))["host-bound"].fix.split())
    assert "torch.compile" not in old and "Measure it: `mpsprof bench`" in old
    assert "Measure it: `mpsprof bench`" in fix and "50,000 parameters" in fix and 'device = "cpu"' in fix


def test_each_part_of_the_fix_only_where_its_facts_say_so():
    """A DataLoader with a batch size gets its line (batch size times the factor); no sync
    seen, no sync advice; no room in memory, no larger batch."""
    with_loader = _fired(_session(0.0004, 0.004, loaders=(loader(batch_size=32),), syncs=False))["host-bound"]
    fix = with_loader.fix
    assert "loader = DataLoader(ds, batch_size=256, ...)   # 8x the batch" in fix
    assert "sync" not in fix and "loss.item()" not in fix and "step % 50" not in fix
    assert "Host-device syncs" not in with_loader.evidence
    assert "- " not in fix.replace("- About", "").replace("- `torch", "")  # no empty bullet left
    session = _session(0.0004, 0.004, loaders=(loader(batch_size=32),))
    session.memory.device_limit = 300 * MIB  # 200 MiB held, 60 MiB of activations: no room for 2x
    full = _fired(session)["host-bound"]
    assert "the batch" not in full.fix and "DataLoader" not in full.fix and "learning rate" not in full.fix
    assert "mode=\"reduce-overhead\"" in full.fix


def test_share_and_step_come_from_one_median():
    """Slow timed steps (their hold) pull the all-steps median (step_ms) up; the finding's
    share and its "X ms of a Y ms step" use the median of the other steps, both."""
    timed = [i for i in range(4, 60) if i % 3]  # two steps in three, each slowed to 8 ms
    durs = [0.008 if i in timed else 0.004 for i in range(60)]
    session = _session(0.0004, 0.004, durs=durs, timed_steps=timed)
    diagnosis = diagnose(session)
    facts = diagnosis.facts
    assert facts["host_bound_step_ms"] == 4.0 and facts["step_ms"] > 4.0 and facts["device_busy_share"] == 0.1
    finding = next(f for f in diagnosis.findings if f.rule == "host-bound")
    assert "busy 10% of each step" in finding.title and "0.40 ms of a 4.00 ms step (10%;" in finding.evidence


def test_busy_device_or_data_wait_or_one_reading_is_no_finding():
    assert "host-bound" not in _fired(_session(0.0036, 0.004))  # the device works 90% of the step
    waiting = _fired(_session(0.0004, 0.004, waits=0.002))  # half the step waits for data
    assert "host-bound" not in waiting
    assert "host-bound" not in _fired(_session(0.0004, 0.004, timed=1))
    assert "host-bound" not in _fired(_session(0.0004, 0.004, device="cpu"))


def test_overview_and_summary_show_device_busy_next_to_data_wait():
    from mpsprofiler.session.summary import summarize
    from mpsprofiler.tui.state import RunState
    from mpsprofiler.tui.widgets.overview import figure_rows

    session = _session(0.0004, 0.004)
    rows = dict(figure_rows(RunState(job=session, live=False)))
    labels = [label for label, _ in figure_rows(RunState(job=session, live=False))]
    assert labels.index("device busy") == labels.index("data wait") + 1 and rows["device busy"] == "10%"
    assert summarize(session)["steps"]["device_busy_share"] == 0.1
    plain = _session(0.0004, 0.004, timed=0)
    assert "device busy" not in dict(figure_rows(RunState(job=plain, live=False)))
