"""Analyzers on sessions built from synthetic events (through ``Session.feed``).

Each test feeds wire-format events (``events.encode`` / ``decode``, the fields the probe
sends: see ``mpsprofiler/probe/steps.py`` and ``sampler.py``) and checks the facts the
analyzers compute from them. ``build_session`` is shared with test_rules_shipped.py.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

from mpsprofiler import events, resources
from mpsprofiler.devices.fake import FakeMpsBackend
from mpsprofiler.diagnosis.analyzers import crash as crash_mod
from mpsprofiler.diagnosis.analyzers import robust
from mpsprofiler.diagnosis.facts import collect_facts
from mpsprofiler.session.session import Session
from tests.unit.test_reason_texts import reason_text

MIB = 2**20
GIB = 2**30

LINUX_ENV = {
    "python": "3.11.7", "platform": "linux", "machine": "x86_64", "apple_silicon": False,
    "rosetta": False, "macos_version": None, "cores_logical": 2, "cores_physical": 2,
    "cores_performance": None, "memory_total": 16 * GIB, "torch": "2.5.1", "mps_built": False,
    "mps_available": False, "cuda_available": False, "torch_threads": 1, "pytorch_env": {},
}  # fmt: skip
MAC_ENV = {
    "python": "3.12.4", "platform": "darwin", "machine": "arm64", "apple_silicon": True,
    "rosetta": False, "macos_version": "14.5", "cores_logical": 10, "cores_physical": 10,
    "cores_performance": 6, "memory_total": 32 * GIB, "torch": "2.5.1", "mps_built": True,
    "mps_available": True, "cuda_available": False, "torch_threads": 10, "pytorch_env": {},
}  # fmt: skip


def steps_event(rows: Sequence[Sequence[Any]], ts: float = 0.0) -> bytes:
    """One ``steps`` event from rows of (i, end, dur, wait, batches, idle, alloc[, wait_cpu, wait_runq])."""
    cols = {name: [row[k] for row in rows] for k, name in enumerate(events.STEP_COLUMNS)}
    if rows and len(rows[0]) > len(events.STEP_COLUMNS):
        for k, name in enumerate(events.STEP_LOADER_COLUMNS, start=len(events.STEP_COLUMNS)):
            cols[name] = [row[k] for row in rows]
    return events.encode(events.KIND_STEPS, ts, mode="optimizer", **cols)


def step_rows(
    durs: Sequence[float],
    waits: Sequence[float] | None = None,
    batches: Sequence[int] | None = None,
    idle: Sequence[int | None] | None = None,
    alloc: Sequence[int | None] | None = None,
    start: float = 1.0,
    cpu: Sequence[float | None] | None = None,
    runq: Sequence[float | None] | None = None,
) -> list[list[Any]]:
    """Step rows; ``cpu`` / ``runq`` add the loader columns (CPU time and run-queue time of
    the fetches, as the probe records them)."""
    rows, t = [], start
    for i, dur in enumerate(durs):
        t += dur
        row = [i, round(t, 6), dur, waits[i] if waits else 0.0, batches[i] if batches else 1,
               idle[i] if idle else None, alloc[i] if alloc else None]  # fmt: skip
        if cpu is not None or runq is not None:
            row += [cpu[i] if cpu else None, runq[i] if runq else None]
        rows.append(row)
    return rows


def mem_event(ts: float, rss: int, *, children: int = 0, available: int = 12 * GIB, total: int = 16 * GIB,
              swap: int = 0, device: dict[str, Any] | None = None) -> bytes:  # fmt: skip
    fields: dict[str, Any] = {"rss": rss, "rss_children": children, "workers": 0, "sys_available": available,
                              "sys_total": total, "swap_used": swap, "cpu_pct": 100.0}  # fmt: skip
    if device is not None:
        fields["device"] = device
    return events.encode(events.KIND_MEM, ts, **fields)


def loader(**over: Any) -> dict[str, Any]:
    cfg = {"id": 1, "batch_size": 32, "num_workers": 0, "pin_memory": False, "prefetch_factor": None,
           "persistent_workers": False, "len": 100, "dataset": "D", "multiprocessing_context": None}  # fmt: skip
    cfg.update(over)
    return cfg


def build_session(
    *,
    env: dict[str, Any] | None = None,
    device: str | None = "cpu",
    loaders: Iterable[dict[str, Any]] = (),
    rows: Sequence[Sequence[Any]] = (),
    mem: Iterable[bytes] = (),
    warnings: Iterable[str] = (),
    exception: dict[str, Any] | None = None,
    model: dict[str, Any] | None = None,
    returncode: int | None = 0,
) -> Session:
    """A session fed the way the launcher feeds it: encoded lines, decoded, in order."""
    lines = [events.encode(events.KIND_HELLO, 0.0, schema=events.SCHEMA_VERSION, pid=1)]
    lines.append(events.encode(events.KIND_ENV, 0.01, **(env if env is not None else LINUX_ENV)))
    for cfg in loaders:
        lines.append(events.encode(events.KIND_DATALOADER, 0.5, **cfg))
    if device is not None:
        info = {"device": device, "device_kind": device.split(":")[0], "parameters": 1000,
                "dtypes": ["float32"], "optimizer": "SGD"}  # fmt: skip
        info.update(model or {})
        lines.append(events.encode(events.KIND_MODEL, 0.9, **info))
    if rows:
        lines.append(steps_event(rows))
    lines.extend(mem)
    for message in warnings:
        lines.append(events.encode(events.KIND_WARNING, 1.0, category="UserWarning", message=message,
                                   filename="x.py", lineno=1))  # fmt: skip
    if exception is not None:
        lines.append(events.encode(events.KIND_EXCEPTION, 50.0, **exception))
    if returncode is not None:
        lines.append(events.encode(events.KIND_EXIT, 60.0, returncode=returncode, duration=60.0))
    session = Session()
    session.feed_many(events.decode(line) for line in lines)
    return session


def facts_of(session: Session) -> dict[str, Any]:
    facts = collect_facts(session)
    assert facts["analyzer_errors"] == []
    json.dumps(facts, allow_nan=False)  # plain JSON, no NaN: facts go into summary.json
    return facts


def crash(message: str, type_: str = "RuntimeError", frames: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    if frames is None:
        frames = [
            {"file": "/home/u/proj/train.py", "line": 40, "func": "<module>", "code": "main()", "user": True},
            {"file": "/home/u/proj/train.py", "line": 31, "func": "main", "code": "loss = loss_fn(model(x), y)",
             "user": True},
            {"file": "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py", "line": 1736,
             "func": "_call_impl", "code": "return forward_call(*args)", "user": False},
        ]  # fmt: skip
    return {"type": type_, "module": "builtins", "message": message, "frames": frames}


# --------------------------------------------------------------------------- robust


def test_theil_sen_ignores_outliers_and_mann_kendall_sees_the_rise():
    rng = random.Random(1)
    xs = list(range(60))
    ys = [3.0 * x + rng.uniform(-1, 1) for x in xs]
    ys[10] = 10_000.0  # a wild sample (GC pause, a sample mid-step)
    ys[40] = -10_000.0
    t = robust.trend(xs, ys)
    assert t is not None and t.slope == pytest.approx(3.0, abs=0.1)
    assert t.significance > 0.999
    noise = [rng.uniform(-1, 1) for _ in xs]
    assert 0.02 < robust.mann_kendall(noise) < 0.98
    assert robust.mann_kendall([5.0] * 20) == 0.0  # all ties: no variance, not rising
    assert robust.mann_kendall(list(range(20, 0, -1))) < 0.01


def test_thin_keeps_the_ends_and_bounds_the_work():
    items = list(range(10_000))
    kept = robust.thin(items, 128)
    assert len(kept) == 128 and kept[0] == 0 and kept[-1] == 9_999
    assert robust.trend(items, [2 * i for i in items]).slope == pytest.approx(2.0)
    assert robust.trend([1, 1, 1], [1, 2, 3]) is None  # no x span


# --------------------------------------------------------------------------- data loading


def test_stall_facts_add_up_and_an_unmeasured_loader_is_capped_by_the_cores():
    rows = step_rows([0.04] * 30, waits=[0.03] * 30)  # no CPU figures: an older recording
    f = facts_of(build_session(env=dict(LINUX_ENV, cores_physical=8, cores_logical=16), loaders=[loader()], rows=rows))
    assert f["data_wait_share"] == pytest.approx(0.75, abs=0.01)
    assert f["loading_wait_share"] == pytest.approx(0.75, abs=0.01)
    assert f["loading_wait_share_low"] == pytest.approx(0.75, abs=0.01)
    # means over the same steps: wait + compute = step
    assert f["data_wait_ms"] == pytest.approx(30.0, abs=0.5) and f["compute_ms"] == pytest.approx(10.0, abs=0.5)
    assert f["data_wait_ms"] + f["compute_ms"] == pytest.approx(f["step_mean_ms"], abs=0.01)
    assert f["first_stall_step"] == 1 and f["last_step"] == 29 and f["steady_steps"] == 29
    assert f["num_workers"] == 0 and f["batch_size"] == 32 and f["persistent_workers"] is False
    assert f["loader_bound"] == "unknown"
    # 30 ms of loading per 10 ms of training, 25% to spare: 4 workers; 7 cores are free
    assert f["num_workers_needed"] == 4 and f["suggested_num_workers"] == 4
    assert "could not tell" in reason_text(f)
    assert f["device_idle_share_while_waiting"] is None  # the CPU is synchronous


def _busy_machine(sys_busy: float, main_cores: float, env: dict[str, Any] | None = None) -> Session:
    """A loader that computes (20 ms of CPU of a 30 ms wait, 10 ms to train) while the sampler
    saw ``sys_busy`` of the machine's CPUs busy and the training process use ``main_cores``."""
    rows = step_rows([0.04] * 100, waits=[0.03] * 100, cpu=[0.02] * 100, runq=[0.005] * 100)
    mem = [events.encode(events.KIND_MEM, 1.0 + k * 0.5, rss=GIB, rss_children=0, workers=0, sys_available=12 * GIB,
                         sys_total=16 * GIB, swap_used=0, cpu_pct=100.0, cpu_main_s=k * 0.5 * main_cores,
                         sys_busy=sys_busy) for k in range(9)]  # fmt: skip
    return build_session(env=env, loaders=[loader(len=1000)], rows=rows, mem=mem)


def test_cores_taken_by_other_programs_are_not_called_free_and_do_not_bound_the_workers_as_free():
    """2 cores, the training on 1, other programs on 1.4 (95% of the machine busy): the table
    said "2, 1 free beside the training" and the reason "this machine has 1 of its 2 free"."""
    from mpsprofiler.report.common import loader_section

    busy = _busy_machine(0.95, 0.5)
    f = facts_of(busy)
    assert f["cores_others_busy"] == pytest.approx(1.4, abs=0.05) and f["cores_free_for_workers"] == 0
    rows = dict(loader_section(busy)[1])
    assert rows["Cores"] == "2: the training kept 1 busy and other programs about 1.4 during the run, so none free"
    assert "this machine has 1 of its" not in reason_text(f)
    assert "(other programs kept about 1.4 busy during the run)" in reason_text(f), reason_text(f)
    assert f["suggested_num_workers"] >= 1  # a worker still gets its turn on a busy core
    quiet = _busy_machine(0.3, 0.5)  # 0.6 of 2 CPUs busy, 0.5 of it the training's: 0.1 others
    q = facts_of(quiet)
    assert q["cores_free_for_workers"] == 1 and "so 1 free" in dict(loader_section(quiet)[1])["Cores"]
    # 8 cores, other programs on 5: 2 free beside the training (it said 7), too few for the 3
    # workers this loader needs, so it is short of cores, not "7 free"
    big = facts_of(_busy_machine(0.75, 1.0, env=dict(LINUX_ENV, cores_physical=8, cores_logical=8)))
    assert big["cores_free_for_workers"] == 2 and big["num_workers_reason"][0] == "cpu_short", big
    assert "(other programs kept about 5.0 busy during the run)" in reason_text(big), reason_text(big)


def test_num_workers_prefers_performance_cores_and_never_exceeds_the_free_ones_unmeasured():
    rows = step_rows([0.04] * 30, waits=[0.036] * 30)  # 4 ms compute: 12 workers needed
    mac = build_session(env=MAC_ENV, device="mps", loaders=[loader(len=1000, persistent_workers=True)], rows=rows)
    f = facts_of(mac)
    assert f["cores_for_workers"] == 6 and f["suggested_num_workers"] == 5  # 6 performance cores - 1
    # spawn costs ~1.5 s a worker: for 100 batches an epoch, restarted each epoch, 2 at most
    restarted = facts_of(build_session(env=MAC_ENV, device="mps", loaders=[loader(len=100)], rows=rows))
    assert restarted["suggested_num_workers"] == 2 and "1,500 ms (spawn)" in reason_text(restarted)
    assert "performance cores" in reason_text(f)
    busy = facts_of(build_session(loaders=[loader(num_workers=4)], rows=rows))  # 2 cores, 4 workers
    assert busy["suggested_num_workers"] == 4  # no more than now: the cores are taken
    quiet = facts_of(build_session(loaders=[loader(num_workers=3)], rows=step_rows([0.04] * 30)))
    assert quiet["loading_wait_share"] == 0.0


def test_a_waiting_loader_gets_workers_from_its_times_not_from_the_cores():
    # 2 cores; each batch waits 36 ms (1 ms of it CPU), the step computes 4 ms
    rows = step_rows([0.04] * 30, waits=[0.036] * 30, cpu=[0.001] * 30, runq=[0.0] * 30)
    f = facts_of(build_session(loaders=[loader(len=1000)], rows=rows))
    assert f["loader_bound"] == "waiting"
    assert f["num_workers_needed"] == 12  # ceil(36 / 4 * 1.25)
    assert f["suggested_num_workers"] == 8 and "Beyond 8 worker processes" in reason_text(f)
    assert "does not limit them" in reason_text(f) and "36.0 ms to load" in reason_text(f)
    assert "PyTorch warns" in reason_text(f)  # 8 > 2 logical CPUs: its warning, explained
    # memory caps it: a quarter of 1 GiB free and ~300 MiB per worker -> 1; of 4 GiB -> 3
    tight = facts_of(build_session(loaders=[loader()], rows=rows, mem=[mem_event(0.5, 100 * MIB, available=GIB)]))
    assert tight["suggested_num_workers"] == 1 and "MiB" in reason_text(tight)
    some = facts_of(build_session(loaders=[loader()], rows=rows, mem=[mem_event(0.5, 100 * MIB, available=4 * GIB)]))
    assert some["suggested_num_workers"] == 3 and "a quarter of the 4.0 GiB" in reason_text(some)
    # a worker that computes 12 of its 36 ms: 3 of them fill the one free core
    busy_rows = step_rows([0.04] * 30, waits=[0.036] * 30, cpu=[0.012] * 30, runq=[0.0] * 30)
    cpu = facts_of(build_session(loaders=[loader(len=1000)], rows=busy_rows))
    assert cpu["loader_bound"] == "waiting" and cpu["suggested_num_workers"] == 3, reason_text(cpu)
    assert "computes 12.0 ms of every 36.0 ms" in reason_text(cpu)
    # 10 batches an epoch, but the fix's workers are persistent (fork, ~50 ms each): they
    # start once for the run's 30 batches, sqrt(30 * 36 / 50) -> 5 (restarted at every epoch,
    # sqrt(10 * 36 / 50) -> 3, which the persistent workers the fix writes do not need)
    short = facts_of(build_session(loaders=[loader(len=10)], rows=rows))
    assert short["suggested_num_workers"] == 5 and "cost more to start" in reason_text(short)
    assert "persistent workers start once for the 30 batches of this run" in reason_text(short)


def test_a_cpu_bound_loader_is_limited_by_the_free_cores_and_says_so():
    # the loading is CPU work (28 of 30 ms), the training 10 ms: 4 workers' worth
    rows = step_rows([0.04] * 30, waits=[0.03] * 30, cpu=[0.028] * 30, runq=[0.0] * 30)
    f = facts_of(build_session(loaders=[loader(num_workers=0)], rows=rows))  # 2 physical cores
    assert f["loader_bound"] == "cpu"
    assert f["suggested_num_workers"] <= 2 and f["num_workers_needed"] == 4
    reason = reason_text(f)
    assert "2 physical cores" in reason and "28.0 ms of CPU work" in reason and "cheaper" in reason
    roomy = facts_of(build_session(env=dict(LINUX_ENV, cores_physical=16), loaders=[loader()], rows=rows))
    assert roomy["suggested_num_workers"] == 4 and roomy["num_workers_helps"] is True


def test_in_memory_and_contended_loaders_get_no_workers():
    rows = step_rows([0.004] * 30, waits=[0.002] * 30, cpu=[0.002] * 30, runq=[0.0] * 30)
    mem = facts_of(build_session(loaders=[loader(dataset="TensorDataset")], rows=rows))
    assert mem["loader_bound"] == "ipc" and mem["suggested_num_workers"] == 0
    assert "Index whole batches" in reason_text(mem)
    # 20 ms waits: 1 ms of CPU, 15 ms queued for a core
    busy = step_rows([0.03] * 30, waits=[0.02] * 30, cpu=[0.001] * 30, runq=[0.015] * 30)
    f = facts_of(build_session(loaders=[loader()], rows=busy))
    assert f["loader_bound"] == "contention" and f["num_workers_helps"] is False
    assert "waiting for a free CPU core" in reason_text(f)


def test_a_wait_that_hovers_around_the_threshold_is_seen_in_the_halves():
    # first half 30% waiting, second half 5%: 17% overall, but not in both halves
    waits = [0.012] * 15 + [0.002] * 15
    f = facts_of(build_session(loaders=[loader()], rows=step_rows([0.04] * 30, waits=waits)))
    assert f["loading_wait_share"] >= 0.15 and f["loading_wait_share_low"] < 0.10


def test_idle_share_on_an_asynchronous_device():
    idle = [1, 1, 0] * 10
    rows = step_rows([0.04] * 30, waits=[0.02] * 30, idle=idle)
    f = facts_of(build_session(env=MAC_ENV, device="mps", loaders=[loader()], rows=rows))
    assert f["device_idle_share_while_waiting"] == pytest.approx(2 / 3, abs=0.01)


def test_workers_restarted_every_epoch_are_measured_and_kept_out_of_the_stall():
    # 5 batches per epoch, 6 epochs: the first step of each later epoch waits for new workers
    durs, waits = [], []
    for k in range(30):
        start = k % 5 == 0 and k > 0
        durs.append(0.08 if start else 0.02)
        waits.append(0.05 if start else 0.001)
    rows = step_rows(durs, waits=waits)
    f = facts_of(build_session(loaders=[loader(num_workers=2, len=5)], rows=rows))
    assert f["workers_respawn_each_epoch"] is True and f["epochs_seen"] == 6
    assert f["respawn_wait_ms"] == pytest.approx(60.0, abs=1.0)
    assert f["respawn_cost_s"] == pytest.approx(0.3, abs=0.01)
    assert f["respawn_share"] == pytest.approx(0.3 / sum(durs), abs=0.01)
    assert f["data_wait_share"] > 0.15 and f["loading_wait_share"] < 0.06
    kept = facts_of(build_session(loaders=[loader(num_workers=2, len=5, persistent_workers=True)], rows=rows))
    assert "workers_respawn_each_epoch" not in kept  # not measurable: not claimed
    single = facts_of(build_session(loaders=[loader(num_workers=2, len=50)], rows=rows))
    assert single["workers_respawn_each_epoch"] is False


# --------------------------------------------------------------------------- threads


def test_thread_oversubscription_does_not_count_unmeasured_workers():
    """No CPU samples of the workers (issue 28: sleeping workers are not busy threads)."""
    env = dict(LINUX_ENV, torch_threads=8, cores_physical=8, cores_logical=16)
    f = facts_of(build_session(env=env, loaders=[loader(num_workers=4)], rows=step_rows([0.01] * 10)))
    assert f["busy_threads"] == 8 and f["thread_oversubscription"] == 1.0
    assert f["suggested_torch_threads"] == 8 and f["max_workers_for_cores"] == 0
    seen = facts_of(build_session(env=env, model={"torch_threads": 2}, rows=step_rows([0.01] * 10)))
    assert seen["torch_threads"] == 2  # a thread count seen while training wins


# --------------------------------------------------------------------------- memory


def _alloc_rows(n: int, per_step: float, base: int = 2 * GIB, noise: int = 0, seed: int = 0) -> list[list[Any]]:
    rng = random.Random(seed)
    alloc = [int(base + per_step * i + rng.randint(-noise, noise)) for i in range(n)]
    return step_rows([0.05] * n, alloc=alloc)


def _mps_mem(rows: list[list[Any]], cached: Any = None, limit: int = 24 * GIB) -> list[bytes]:
    out = []
    for k, row in enumerate(rows):
        dev = {"allocated": row[6], "cached": cached(k) if cached else row[6] + GIB, "peak": None,
               "total": 16 * GIB, "limit": limit}  # fmt: skip
        out.append(mem_event(row[1], 3 * GIB, device=dev))
    return out


def test_tensor_leak_on_mps_from_the_allocated_bytes_per_step():
    rows = _alloc_rows(200, 2 * MIB, noise=8 * MIB)
    f = facts_of(build_session(env=MAC_ENV, device="mps", rows=rows, mem=_mps_mem(rows)))
    assert f["leak_source"].startswith("Memory held by tensors")
    assert f["alloc_growth_per_step"] == pytest.approx(2 * MIB, rel=0.1)
    assert f["leak_growth_mib_per_100_steps"] == pytest.approx(200, rel=0.1)
    assert f["leak_significance"] > 0.99 and f["leak_consistency"] > 0.8
    assert f["leak_from_step"] == 1 and f["leak_to_step"] == 199
    # headroom: 24 GiB limit - the last cached figure, at 2 MiB per step
    last_cached = rows[-1][6] + GIB
    assert f["steps_until_oom"] == pytest.approx((24 * GIB - last_cached) / (2 * MIB), rel=0.1)


def test_allocator_noise_is_not_a_leak():
    rows = _alloc_rows(200, 0, noise=64 * MIB, seed=3)
    f = facts_of(build_session(env=MAC_ENV, device="mps", rows=rows, mem=_mps_mem(rows)))
    assert f["leak_significance"] < 0.95 or f["leak_growth_mib"] < 64
    assert f["steps_until_oom"] is None


def test_a_ramp_that_levels_off_is_not_consistent_growth():
    alloc = [2 * GIB + min(i, 40) * 8 * MIB for i in range(200)]  # caches fill, then flat
    rows = step_rows([0.05] * 200, alloc=alloc)
    f = facts_of(build_session(env=MAC_ENV, device="mps", rows=rows, mem=_mps_mem(rows)))
    assert f["leak_consistency"] is None or f["leak_consistency"] < 0.5


def test_tensor_leak_on_cpu_from_rss_placed_on_the_step_axis():
    rows = step_rows([0.1] * 40)  # steps end at 1.1, 1.2, ... 5.0 s
    mem = [mem_event(1.05 + 0.5 * k, 400 * MIB + int(k * 5 * 4 * MIB)) for k in range(8)]  # 4 MiB per step
    f = facts_of(build_session(rows=rows, mem=mem))
    assert f["leak_source"].startswith("Process memory")
    assert f["leak_growth_per_step"] == pytest.approx(4 * MIB, rel=0.05)
    assert f["leak_significance"] > 0.99
    assert f["steps_until_oom"] == pytest.approx(12 * GIB / (4 * MIB), rel=0.05)


def test_cache_growth_while_tensor_memory_is_flat_with_a_fake_mps_backend():
    # recorded MPS figures replayed through the fake backend: allocated flat, driver growing
    backend = FakeMpsBackend([(2 * GIB, 3 * GIB + k * 64 * MIB) for k in range(30)], recommended_max=20 * GIB)
    rows = step_rows([0.2] * 30, alloc=[2 * GIB] * 30)
    mem = [mem_event(row[1], 3 * GIB, device=backend.memory().as_dict()) for row in rows]
    f = facts_of(build_session(env=MAC_ENV, device="mps", rows=rows, mem=mem))
    assert f["alloc_flat"] is True
    assert f["cache_growth_significance"] > 0.99
    assert f["cache_growth_mib"] == pytest.approx(28 * 64, rel=0.05)
    assert f["cache_growth_mib_per_min"] == pytest.approx(64 * 60 / 0.2, rel=0.05)
    assert f["device_limit"] == int(20 * GIB * 1.7)  # recommended max x default watermark
    assert f["cache_growth_limit_share"] == pytest.approx(28 * 64 * MIB / (20 * GIB * 1.7), rel=0.05)


def test_system_memory_swap_and_pressure():
    rows = step_rows([0.2] * 20)
    mem = [mem_event(row[1], 10 * GIB + k * 100 * MIB, available=GIB - k * 20 * MIB, swap=k * 64 * MIB)
           for k, row in enumerate(rows)]  # fmt: skip
    f = facts_of(build_session(rows=rows, mem=mem, loaders=[loader(batch_size=64)]))
    assert f["sys_available_min_share"] == pytest.approx((GIB - 19 * 20 * MIB) / (16 * GIB), abs=1e-3)
    assert f["swap_growth_mib"] == pytest.approx(19 * 64)
    assert f["memory_pressure"] == pytest.approx((10 * GIB + 19 * 100 * MIB) / (16 * GIB), abs=1e-3)
    assert f["rss_growth_significance"] > 0.99 and f["rss_growth_mib_per_min"] > 0
    assert f["suggested_batch_size"] == 32


def test_device_headroom_and_the_largest_batch_that_fits():
    # Adam keeps 2 states: fixed = 1M params x 4 bytes x (1 + 1 + 2) = 16 MB
    fixed = 1_000_000 * 4 * 4
    peak = fixed + 32 * 10 * MIB  # batch 32 at 10 MiB per sample
    rows = step_rows([0.05] * 20, alloc=[peak] * 20)
    dev = {"allocated": peak, "cached": int(0.95 * GIB), "peak": None, "total": GIB, "limit": GIB}
    f = facts_of(build_session(env=MAC_ENV, device="mps", rows=rows, loaders=[loader(batch_size=32)],
                               model={"parameters": 1_000_000, "optimizer": "Adam"},
                               mem=[mem_event(row[1], 2 * GIB, device=dev) for row in rows]))  # fmt: skip
    assert f["model_state_bytes"] == fixed
    assert f["memory_per_sample"] == 10 * MIB
    assert f["max_batch_size_fits"] == 64  # 64 x 10 MiB + 16 MB < 0.9 GiB < 128 x 10 MiB
    assert f["device_peak_share"] == pytest.approx(0.95, abs=1e-3)
    assert f["suggested_batch_size"] == 16


# --------------------------------------------------------------------------- warm-up


def test_warmup_facts():
    durs = [0.5, 0.4, 0.3, 0.3] + [0.02] * 40
    f = facts_of(build_session(rows=step_rows(durs)))
    assert f["warmup_steps"] == 4 and f["benchmark_from_step"] == 4
    assert f["warmup_s"] == pytest.approx(1.5, abs=1e-3)
    assert f["warmup_cost_s"] == pytest.approx(1.5 - 4 * 0.02, abs=0.01)
    assert f["warmup_share"] == pytest.approx(1.5 / (1.5 + 0.8), abs=0.01)
    assert f["warmup_first_step_ms"] == pytest.approx(500.0)
    assert f["warmup_first_step_ratio"] == pytest.approx(25.0, rel=0.05)


def test_alternating_steps_are_not_taken_for_a_long_warm_up():
    """A loader that yields each batch twice: steps alternate between ~36 ms of waiting and
    none, so no two steps in a row are near the median of either kind. A third of the run
    (13 of 40) was called warm-up, leaving too few steady steps for the stall finding; the
    pairs' mean settles at once. A warm-up that really comes down keeps its length."""
    from mpsprofiler.session.steps import detect_warmup

    alternating = [0.2] + [0.037, 0.001] * 20
    assert detect_warmup(alternating) == 1
    slowing = [0.5, 0.4, 0.3, 0.3] + [0.037, 0.001] * 20
    assert detect_warmup(slowing) == 4
    assert detect_warmup([0.5, 0.4, 0.3, 0.3] + [0.02] * 40) == 4  # the old rule, unchanged
    never = [0.5 - 0.01 * i for i in range(40)]  # a run that only comes down: a third, as before
    assert detect_warmup(never) == 13


# --------------------------------------------------------------------------- crashes

WORDINGS = [
    (("MPS backend out of memory (MPS allocated: 17.25 GB, other allocations: 1.02 GB, max allowed: 18.13 GB). "
      "Tried to allocate 256.00 MB on private pool. Use PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0 to disable upper limit "
      "for memory allocations (may cause system failure)."), "RuntimeError", "oom_mps"),
    ("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB", "OutOfMemoryError",
     "oom_cuda"),
    ("torch.OutOfMemoryError: allocation failed", "RuntimeError", "oom_cuda"),
    (("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to "
      "allocate 274877906944 bytes."), "RuntimeError", "oom_cpu"),
    (("The operator 'aten::linalg_eig' is not currently implemented for the MPS device. If you want this op to be "
      "considered for addition please comment on https://github.com/pytorch/pytorch/issues/141287"),
     "NotImplementedError", "not_implemented_mps"),
    ("The operator 'aten::_fft_r2c' is not current implemented for the MPS device.", "NotImplementedError",
     "not_implemented_mps"),
    ("Expected all tensors to be on the same device, but found at least two devices, mps:0 and cpu!", "RuntimeError",
     "device_mismatch"),
    (("Expected all tensors to be on the same device, but got mat1 is on cpu, different from other tensors on mps:0 "
      "(when checking argument in method wrapper_CUDA_addmm)"), "RuntimeError", "device_mismatch"),
    ("Placeholder storage has not been allocated on MPS device!", "RuntimeError", "device_mismatch"),
    ("Tensor for argument #2 'mat2' is on CPU, but expected it to be on GPU (while checking arguments for mm)",
     "RuntimeError", "device_mismatch"),
    ("Tensor on device meta is not on the expected device cpu!", "RuntimeError", "device_mismatch"),
    (("Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support float64. Please use float32 "
      "instead."), "TypeError", "float64_mps"),
    ("MPS BFloat16 is only supported on MacOS 14 or newer", "RuntimeError", "bf16_macos"),
    ("MPS bfloat16 type is supported on MacOS 14.0 or newer.", "TypeError", "bf16_macos"),
    (("\n        An attempt has been made to start a new process before the\n        current process has finished its "
      "bootstrapping phase.\n"), "RuntimeError", "spawn_bootstrap"),
    ("DataLoader worker (pid(s) 4242) exited unexpectedly", "RuntimeError", "worker_exited"),
    ("division by zero", "ZeroDivisionError", "other"),
]  # fmt: skip


@pytest.mark.parametrize("message,type_,kind", WORDINGS, ids=[w[2] + str(i) for i, w in enumerate(WORDINGS)])
def test_every_wording_is_classified(message, type_, kind):
    assert crash_mod.classify(type_, message) == kind


@pytest.mark.parametrize("message,devices", [
    ("Expected all tensors to be on the same device, but found at least two devices, mps:0 and cpu!", "mps:0 and cpu"),
    (("Expected all tensors to be on the same device, but got index is on cpu, different from other tensors on "
      "cuda:0 (when checking argument for argument index)"), "cpu and cuda:0"),
    ("Tensor on device meta is not on the expected device cpu!", "meta and cpu"),
    ("Tensor for argument #2 'mat2' is on CPU, but expected it to be on GPU", "cpu and gpu"),
    ("Placeholder storage has not been allocated on MPS device!", "cpu and mps"),
])  # fmt: skip
def test_crash_devices(message, devices):
    f = facts_of(build_session(exception=crash(message), returncode=1, rows=step_rows([0.1] * 3)))
    assert f["crash_kind"] == "device_mismatch" and f["crash_devices"] == devices


def test_crash_location_is_the_users_line_not_the_profilers_hook():
    frames = [
        {"file": "/home/u/proj/train.py", "line": 18, "func": "<module>", "code": "for x, y in loader:", "user": True},
        {"file": resources.OWN_DIR + "probe/probe.py", "line": 225, "func": "__next__", "code": "batch = orig_next(it)",
         "user": True},
        {"file": "/usr/lib/python3/site-packages/torch/utils/data/dataloader.py", "line": 1304, "func": "_try_get_data",
         "code": "raise RuntimeError(", "user": False},
    ]  # fmt: skip
    msg = "The operator 'aten::linalg_eig' is not currently implemented for the MPS device."
    s = build_session(exception=crash(msg, "NotImplementedError", frames), returncode=1, rows=step_rows([0.1] * 3))
    s.run["cwd"] = "/home/u/proj"
    f = facts_of(s)
    assert (f["crash_file"], f["crash_line"], f["crash_code"]) == ("train.py", 18, "for x, y in loader:")
    assert f["crash_op"] == "aten::linalg_eig" and f["crash_step"] == 3 and f["crashed"] is True


def test_oom_figures_are_read_from_the_message():
    f = facts_of(build_session(exception=crash(WORDINGS[0][0]), returncode=1, loaders=[loader(batch_size=48)]))
    assert f["crash_kind"] == "oom_mps" and f["oom_requested"] == "256.00 MB"
    assert (f["oom_mps_allocated"], f["oom_mps_other"], f["oom_mps_max_allowed"]) == ("17.25 GB", "1.02 GB", "18.13 GB")
    assert f["suggested_batch_size"] == 16  # a power of two at most half of 48
    cpu = facts_of(build_session(exception=crash(WORDINGS[3][0]), returncode=1))
    assert cpu["crash_kind"] == "oom_cpu" and cpu["oom_requested"] == "256.0 GiB"


def test_a_spawned_worker_dying_before_the_first_batch_is_the_missing_main_guard():
    msg = "DataLoader worker (pid(s) 4242) exited unexpectedly"
    spawned = build_session(loaders=[loader(num_workers=2, multiprocessing_context="spawn")], exception=crash(msg),
                            returncode=1)  # fmt: skip
    f = facts_of(spawned)
    assert f["crash_kind"] == "spawn_bootstrap" and f["crash_kind_inferred"] is True
    assert f["worker_start_method"] == "spawn"
    mac = facts_of(build_session(env=MAC_ENV, loaders=[loader(num_workers=2)], exception=crash(msg), returncode=1))
    assert mac["crash_kind"] == "spawn_bootstrap"  # spawn is the macOS default
    forked = facts_of(build_session(loaders=[loader(num_workers=2)], exception=crash(msg), returncode=1))
    assert forked["crash_kind"] == "worker_exited"  # fork on Linux: some other death
    later = facts_of(build_session(loaders=[loader(num_workers=2, multiprocessing_context="spawn")],
                                   rows=step_rows([0.1] * 5), exception=crash(msg), returncode=1))  # fmt: skip
    assert later["crash_kind"] == "worker_exited"  # batches arrived: the import was fine


def test_no_crash():
    f = facts_of(build_session(rows=step_rows([0.1] * 5)))
    assert f["crashed"] is False and f["crash_kind"] is None


# --------------------------------------------------------------------------- environment


@pytest.mark.parametrize("over,cause", [
    ({"mps_built": False, "mps_available": False}, "not_built"),
    ({"mps_available": False, "macos_version": "13.6", "torch": "2.9.0"}, "macos_too_old"),
    ({"mps_available": False}, "no_device"),
    ({"mps_available": False, "rosetta": True, "machine": "x86_64"}, "rosetta"),
])  # fmt: skip
def test_why_mps_is_unavailable(over, cause):
    """A name, not a sentence: the words are the rule file's (rules/environment.yaml)."""
    f = facts_of(build_session(env=dict(MAC_ENV, **over), device="cpu"))
    assert f["mps_unavailable_cause"] == cause
    assert f["is_macos"] is True and f["mps_available"] is False


def test_intel_mac_and_linux():
    intel = facts_of(build_session(env=dict(MAC_ENV, apple_silicon=False, mps_available=False, machine="x86_64")))
    assert intel["intel_mac"] is True and intel["mps_unavailable_cause"] == "intel_mac"
    linux = facts_of(build_session())
    assert linux["is_macos"] is False and linux["intel_mac"] is False and linux["mps_unavailable_cause"] is None


def test_pin_memory_on_mps_from_the_loader_or_the_warning():
    rows = step_rows([0.1] * 5)
    by_loader = build_session(env=MAC_ENV, device="mps", loaders=[loader(pin_memory=True)], rows=rows)
    assert facts_of(by_loader)["pin_memory_on_mps"] is True
    warned = build_session(env=MAC_ENV, device="mps", rows=rows, warnings=[
        "'pin_memory' argument is set as true but not supported on MPS now, device pinned memory won't be used."])
    assert facts_of(warned)["pin_memory_on_mps"] is True
    on_cpu = build_session(loaders=[loader(pin_memory=True)], rows=rows)
    assert facts_of(on_cpu)["pin_memory_on_mps"] is False


@pytest.mark.parametrize("value,ratio,unlimited,suggested", [
    (None, 1.7, False, 1.0), ("0.0", 0.0, True, 1.0), ("1.2", 1.2, False, 1.0), ("0.8", 0.8, False, 0.6),
])  # fmt: skip
def test_watermark_and_fallback_variables(value, ratio, unlimited, suggested):
    pyenv = {"PYTORCH_ENABLE_MPS_FALLBACK": "1"}
    if value is not None:
        pyenv["PYTORCH_MPS_HIGH_WATERMARK_RATIO"] = value
    f = facts_of(build_session(env=dict(MAC_ENV, pytorch_env=pyenv), device="mps"))
    assert f["watermark_ratio"] == ratio and f["watermark_unlimited"] is unlimited
    assert f["watermark_ratio_set"] is (value is not None)
    assert f["suggested_watermark_ratio"] == suggested and f["fallback_env_set"] is True


@pytest.mark.parametrize("value,peak,cap,suggested", [
    (None, 0.6, "cap", 1.0),      # 1.0 leaves this run's 0.6 room
    (None, 1.2, "cap", 1.35),     # never under the run's own peak + 10% (up to 0.05)
    (None, 1.6, "tight", None),   # 1.6 x 1.1 is over the 1.7 in force: no lower cap fits
    ("0.0", 1.9, "tight", None),  # over 2.0, the highest ratio torch takes
    ("0.4", None, "tight", None), # was 0.5: a "cap" above the ratio in force
    ("0.8", None, "cap", 0.6),
])  # fmt: skip
def test_a_suggested_cap_fits_the_runs_own_peak(value, peak, cap, suggested):
    """The allocator refuses a buffer once the driver's allocated size would pass high x
    recommended max (MPSAllocator.mm alloc_buffer): a cap under what the run held stops it."""
    from mpsprofiler.diagnosis.analyzers.environment import _watermark

    f = _watermark({} if value is None else {"PYTORCH_MPS_HIGH_WATERMARK_RATIO": value}, peak)
    assert (f["watermark_cap"], f["suggested_watermark_ratio"]) == (cap, suggested)
    assert (f["suggested_low_watermark_ratio"] is None) is (suggested is None)


def test_an_empty_session_computes_without_errors():
    f = facts_of(Session())
    assert f["steady_steps"] == 0 and f["data_wait_share"] is None and "leak_significance" not in f
    assert not any(isinstance(v, float) and math.isnan(v) for v in f.values())


# --------------------------------------------------------------------------- the registry


def test_collecting_a_fact_from_two_analyzers_is_refused() -> None:
    from mpsprofiler.diagnosis.analyzers.registry import Analyzer, DuplicateFact, register

    registry: list[Analyzer] = []
    register(Analyzer("a", lambda s: {}, frozenset({"x", "y"})), registry)
    with pytest.raises(DuplicateFact, match="'a' and 'b' both provide \\['y'\\]"):
        register(Analyzer("b", lambda s: {}, frozenset({"y", "z"})), registry)
    with pytest.raises(DuplicateFact, match="reserved"):
        register(Analyzer("c", lambda s: {}, frozenset({"device_kind"})), registry)
    assert [a.name for a in registry] == ["a"]


def test_worker_start_method_has_one_provider() -> None:
    from mpsprofiler.diagnosis.analyzers import ANALYZERS, provider_of

    assert provider_of("worker_start_method") == "dataloader"
    assert sum("worker_start_method" in a.provides for a in ANALYZERS) == 1


def test_workers_a_fix_gives_start_by_the_method_the_script_fixed() -> None:
    """Sweep s52 a01 under spawn (``multiprocessing.set_start_method("spawn", force=True)``, as
    CUDA scripts do, here on Linux): a loader without workers was priced as if its workers
    would fork (50 ms each) and told 8 for a run whose whole wait was 3 s; they started by
    spawn and the loop went from 4.7 s to 33 s. The method the script fixed, recorded with the
    loader, is the one a fix's workers start by; without one the platform's default."""
    from types import SimpleNamespace

    from mpsprofiler.diagnosis.analyzers.common import start_method
    from mpsprofiler.probe.loader_config import _start_method_set

    linux = SimpleNamespace(env={"platform": "linux", "python": "3.11.7"})
    loader = {"num_workers": 1, "multiprocessing_context": None}
    assert start_method(linux, {**loader, "start_method_set": "spawn"}) == "spawn"  # type: ignore[arg-type]
    assert start_method(linux, {**loader, "start_method_set": None}) == "fork"  # type: ignore[arg-type]
    assert start_method(linux, {**loader, "num_workers": 0, "start_method_set": "spawn"}) is None  # type: ignore[arg-type]
    # the probe reads it without fixing it (allow_none): the script's own choice stays open
    import multiprocessing

    assert _start_method_set() == multiprocessing.get_start_method(allow_none=True)


@pytest.mark.parametrize("recording", ["slow_dataloader", "ddp_straggler"])
def test_every_analyzer_returns_only_the_facts_it_declares(recording: str) -> None:
    from mpsprofiler.diagnosis.analyzers import ANALYZERS
    from mpsprofiler.session.recording import load_run

    loaded = load_run(Path(__file__).parent.parent / "fixtures" / "recordings" / recording)
    sessions = [loaded.session, *loaded.session.ranks.values()]
    for session in sessions:
        for entry in ANALYZERS:
            undeclared = set(entry.fn(session)) - entry.provides
            assert not undeclared, f"analyzer '{entry.name}' returns undeclared facts {sorted(undeclared)}"


def test_every_fact_a_shipped_rule_reads_has_a_provider() -> None:
    """A rule over a fact no analyzer declares could never fire (a typo, or a renamed fact)."""
    from mpsprofiler.diagnosis.analyzers import ANALYZERS
    from mpsprofiler.diagnosis.analyzers.registry import RESERVED_FACTS
    from mpsprofiler.diagnosis.rules import load_builtin_and_user

    provided = set().union(*(a.provides for a in ANALYZERS)) | RESERVED_FACTS
    for rule in load_builtin_and_user():
        names = {*rule.fact_names, *rule.requires, *rule.fix_template.fields, *([rule.first_step] if rule.first_step else [])}
        # ... and what its phrases read: each table is chosen by a fact's value, each text may use others
        names |= {name for table, texts in (rule.phrases or {}).items()
                  for name in (table, *(f for t in texts.values() for f in t.fields))}
        assert names <= provided, f"rule '{rule.id}' reads facts no analyzer provides: {sorted(names - provided)}"
