"""Every shipped rule fires where it should: real trigger scripts through the real CLI.

Rules that need a Mac GPU, a crash message only MPS or CUDA print, or a machine state a
test must not cause (swap, a full GPU) are checked on sessions built from recorded
figures (``FakeMpsBackend`` and the messages PyTorch prints) through the real engine and
the real rule files. The CLI runs share two module-scoped fixtures (the triggers judged from
measured times, and the others) and run a few at a time.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from helpers import child_env, loud_rules, mpsprof_cli, read_summary
from mpsprofiler.devices.fake import FakeMpsBackend
from mpsprofiler.diagnosis import diagnose
from mpsprofiler.diagnosis.findings import Finding
from mpsprofiler.diagnosis.rules import load_rules
from mpsprofiler.session.recording import load_run
from mpsprofiler.session.session import Session
from tests.unit.test_analyzers import (
    GIB,
    LINUX_ENV,
    MAC_ENV,
    MIB,
    WORDINGS,
    build_session,
    crash,
    loader,
    mem_event,
    step_rows,
)

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "rules"
EXAMPLES = REPO / "examples"
RULE_FILES = [
    "dataloader-stall.yaml", "pin-memory-mps.yaml", "thread-oversubscription.yaml", "tensor-leak.yaml",
    "cache-growth.yaml", "memory-pressure.yaml", "near-device-limit.yaml", "oom-crash.yaml",
    "op-not-implemented-crash.yaml", "device-mismatch-crash.yaml", "float64-mps-crash.yaml",
    "long-warmup.yaml", "environment.yaml", "spawn-bootstrap-crash.yaml", "worker-respawn.yaml",
    "anomaly-detection.yaml",
]  # fmt: skip
"""The rule files this module answers for (ops.yaml is tested with the op facts)."""

try:
    import psutil

    _CORES = psutil.cpu_count(logical=False) or os.cpu_count() or 2
except ImportError:  # pragma: no cover
    _CORES = os.cpu_count() or 2

# name -> (script, args, extra environment)
TIMED: dict[str, tuple[str, list[str], dict[str, str]]] = {
    "stall_critical": ("triggers/dataloader_stall.py", [], {}),
    # 20 ms sleeps: on a busy machine the wait for a core after each wake-up (~10 ms at a
    # load of 16 on 2 cores) stays smaller than the sleep, so the loader still reads as waiting
    "stall_warning": ("triggers/dataloader_stall.py", ["--load-ms", "20", "--compute-ms", "80"], {}),
    # the workers' start-up share of the epoch: tests/conftest.py's worker_respawn_recorded,
    # which test_patch_loader_rules.py patches too, records it (alone, first) for `runs`
    "respawn": ("triggers/worker_respawn.py", [], {}),
    "warmup": ("triggers/long_warmup.py", [], {}),
    "clean": ("clean_compute.py", [], {}),  # no stall, no warm-up note: measured times too
}
"""Triggers judged from measured times (wait shares, warm-up cost): the `runs` fixture, whose
tests are marked serial (CI runs them with no other test beside them)."""
UNTIMED: dict[str, tuple[str, list[str], dict[str, str]]] = {
    # the slowest (a spawned worker): tests/conftest.py's spawn_bootstrap_recorded, which
    # test_patch.py patches too, records it (alone, first) for the untimed_runs fixture
    "spawn": ("triggers/spawn_bootstrap.py", [], {}),
    "leak": ("triggers/tensor_leak.py", [], {}),  # memory growth per step
    # torch's default: one intra-op thread per core, as on a user's machine (counted threads)
    "threads": ("triggers/thread_oversubscription.py", [], {"OMP_NUM_THREADS": str(max(2, _CORES)),
                                                            "MKL_NUM_THREADS": str(max(2, _CORES))}),
    "oom": ("triggers/oom_crash.py", [], {}),  # crash messages
    "mismatch": ("triggers/device_mismatch.py", [], {}),
}
"""Triggers judged from counts, memory and crash messages: the `untimed_runs` fixture, which
may run beside other tests."""
TRIGGERS = TIMED | UNTIMED
CLI_RULES = {
    "dataloader-stall-critical": "stall_critical",
    "dataloader-stall": "stall_warning",
    "thread-oversubscription": "threads",
    "tensor-leak": "leak",
    "oom-crash-cpu": "oom",
    "device-mismatch-crash": "mismatch",
    "long-warmup": "warmup",
    "spawn-bootstrap-crash": "spawn",
    "worker-respawn": "respawn",
}
PARALLEL = 3


def _run(name: str, base: Path) -> dict[str, Any]:
    script, args, extra = TRIGGERS[name]
    run_dir = base / name
    env = child_env(**{"MKL_NUM_THREADS": "1", **extra, "ML_DEVICE": None})  # the examples' default device
    proc = mpsprof_cli("run", "--headless", "-o", str(run_dir), str(EXAMPLES / script), *args,
                       env=env, timeout=180, cwd=REPO)
    summary = read_summary(run_dir, missing_ok=True)
    return {"returncode": proc.returncode, "stderr": proc.stderr, "summary": summary, "run_dir": run_dir}


def _run_all(names: dict[str, Any], base: Path) -> dict[str, dict[str, Any]]:
    with ThreadPoolExecutor(PARALLEL) as pool:
        futures = {name: pool.submit(_run, name, base) for name in names}
        return {name: f.result() for name, f in futures.items()}


def _recorded(rec: Any) -> dict[str, Any]:
    """A shared recording (tests/conftest.py, a ``Recorded``) as ``_run`` returns a run."""
    return {"returncode": rec.proc.returncode, "stderr": rec.proc.stderr,
            "summary": read_summary(rec.run, missing_ok=True), "run_dir": rec.run}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, worker_respawn_recorded: Any) -> dict[str, dict[str, Any]]:
    """The timed triggers (kept for the module: failures replay the runs). The respawn
    trigger is the shared recording (tests/conftest.py) that its patch test profiles again."""
    recorded = {"respawn": _recorded(worker_respawn_recorded)}
    return _run_all({name: TIMED[name] for name in TIMED if name not in recorded},
                    tmp_path_factory.mktemp("triggers")) | recorded


@pytest.fixture(scope="module")
def untimed_runs(tmp_path_factory: pytest.TempPathFactory, spawn_bootstrap_recorded: Any) -> dict[str, dict[str, Any]]:
    """The untimed triggers; the spawn trigger is the shared recording (tests/conftest.py)
    that its patch tests (test_patch.py) patch and prove."""
    recorded = {"spawn": _recorded(spawn_bootstrap_recorded)}
    return _run_all({name: UNTIMED[name] for name in UNTIMED if name not in recorded},
                    tmp_path_factory.mktemp("untimed_triggers")) | recorded


def findings(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    assert run["summary"], run["stderr"][-3000:]
    return {f["rule"]: f for f in run["summary"]["findings"]}


def explain(run: dict[str, Any]) -> str:
    """The run's facts, replayed from its recording: what a failing assertion shows."""
    try:
        facts = diagnose(load_run(run["run_dir"]).session).facts
    except Exception as exc:  # noqa: BLE001 - only for the message
        return f"(no facts: {exc})"
    shown = {k: v for k, v in facts.items() if not isinstance(v, str) or len(v) < 200}
    return json.dumps(shown, indent=0, default=str)[:6000] + "\n" + run["stderr"][-2000:]


def fired(session: Session) -> dict[str, Finding]:
    diagnosis = diagnose(session)
    assert diagnosis.facts["analyzer_errors"] == []
    return {f.rule: f for f in diagnosis.findings}


# --------------------------------------------------------------------------- CLI runs


def _fires(run: dict[str, Any], rule: str) -> None:
    found = findings(run)
    assert rule in found, f"{rule} did not fire; findings: {sorted(found)}\n{explain(run)}"
    finding = found[rule]
    assert "?" not in finding["title"]
    assert "```python" in finding["fix"] and "{{" not in finding["fix"]


@pytest.mark.slow
@pytest.mark.serial
@pytest.mark.parametrize("rule", sorted(r for r, name in CLI_RULES.items() if name in TIMED))
def test_trigger_script_fires_its_rule(runs, rule):
    _fires(runs[CLI_RULES[rule]], rule)


@pytest.mark.slow
@pytest.mark.parametrize("rule", sorted(r for r, name in CLI_RULES.items() if name in UNTIMED))
def test_untimed_trigger_script_fires_its_rule(untimed_runs, rule):
    _fires(untimed_runs[CLI_RULES[rule]], rule)


@pytest.mark.slow
@pytest.mark.serial
def test_stall_names_a_concrete_num_workers(runs):
    crit = findings(runs["stall_critical"])["dataloader-stall-critical"]
    facts = crit["facts"]
    assert facts["loading_wait_share"] >= 0.35
    summary = runs["stall_critical"]["summary"]
    assert summary["dataloaders"][0]["num_workers"] == 0
    # the suggestion is a number, in the fix's code; the reason says how it was computed
    assert "num_workers=" in crit["fix"] and "num_workers=?" not in crit["fix"]
    suggested = int(crit["fix"].split("num_workers=")[1].split(",")[0].split("\n")[0])
    # the trigger's loading sleeps 30 ms per batch against 10 ms of compute: workers that
    # wait are not limited by the cores, so the number follows from the times
    assert suggested >= 2 and "does not limit them" in crit["fix"]  # not capped at cores - 1
    assert crit["title"].endswith(f"try num_workers={suggested}")
    assert "ms to load" in crit["fix"] and "field notes" not in crit["fix"]
    warn = findings(runs["stall_warning"])
    assert "dataloader-stall-critical" not in warn
    assert 0.15 <= warn["dataloader-stall"]["facts"]["loading_wait_share"] < 0.35


@pytest.mark.slow
def test_leak_is_reported_with_its_growth_per_step(untimed_runs):
    found = findings(untimed_runs["leak"])
    assert "tensor-leak" in found, explain(untimed_runs["leak"])
    leak = found["tensor-leak"]
    assert "KiB per step" in leak["evidence"] and "Process memory (RSS" in leak["evidence"]
    assert leak["facts"]["leak_growth_mib"] >= 64
    assert "loss.item()" in leak["fix"] and ".detach()" in leak["fix"]
    assert leak["first_step"] is not None


@pytest.mark.slow
def test_device_mismatch_names_the_line_and_the_fix(untimed_runs):
    run = untimed_runs["mismatch"]
    assert run["returncode"] == 1
    found = findings(run)["device-mismatch-crash"]
    assert "examples/triggers/device_mismatch.py:" in found["title"]
    line = int(found["title"].rsplit(":", 1)[1])
    source = (EXAMPLES / "triggers" / "device_mismatch.py").read_text().splitlines()[line - 1]
    assert "model(x)" in source and source.strip() in found["evidence"]
    assert "meta and cpu" in found["title"]
    assert "{k: v.to(device) for k, v in batch.items()}" in found["fix"]
    assert "device=x.device" in found["fix"]


@pytest.mark.slow
def test_spawn_crash_points_at_the_main_guard(untimed_runs):
    found = findings(untimed_runs["spawn"])["spawn-bootstrap-crash"]
    assert 'if __name__ == "__main__":' in found["fix"]
    assert "spawn_bootstrap.py:18" in found["evidence"]  # the loop, not the profiler's hook


@pytest.mark.slow
@pytest.mark.serial
def test_clean_script_has_no_warning(runs):
    run = runs["clean"]
    assert run["returncode"] == 0, run["stderr"][-3000:]
    assert loud_rules(run["summary"]) == []
    assert run["summary"]["steps"]["count"] >= 50


# --------------------------------------------------------------------------- recorded figures


def _mac(**over: Any) -> dict[str, Any]:
    return dict(MAC_ENV, **over)


def _pin_memory() -> Session:
    return build_session(env=_mac(), device="mps", loaders=[loader(pin_memory=True)], rows=step_rows([0.05] * 10))


def _cache_growth(recommended_max: int | None = 21 * GIB) -> Session:
    backend = FakeMpsBackend([(3 * GIB, 4 * GIB + k * 96 * MIB) for k in range(40)], recommended_max=recommended_max)
    rows = step_rows([0.25] * 40, alloc=[3 * GIB] * 40)
    mem = [mem_event(row[1], 2 * GIB, device=backend.memory().as_dict()) for row in rows]
    return build_session(env=_mac(), device="mps", rows=rows, mem=mem)


def _near_limit(env: dict[str, Any] | None = None) -> Session:
    backend = FakeMpsBackend([(int(15.5 * GIB), int(16.5 * GIB))], recommended_max=10 * GIB)  # limit 17 GiB
    rows = step_rows([0.1] * 20, alloc=[int(15.5 * GIB)] * 20)
    mem = [mem_event(row[1], 2 * GIB, device=backend.memory().as_dict()) for row in rows]
    return build_session(env=env or _mac(), device="mps", rows=rows, mem=mem, loaders=[loader(batch_size=64)])


def _pressure() -> Session:
    rows = step_rows([0.2] * 30)
    mem = [mem_event(row[1], 20 * GIB, available=int(1.5 * GIB), total=32 * GIB, swap=k * 40 * MIB)
           for k, row in enumerate(rows)]  # fmt: skip
    return build_session(env=_mac(), device="mps", rows=rows, mem=mem, loaders=[loader(batch_size=64)])


def _mps_leak() -> Session:
    alloc = [2 * GIB + k * 3 * MIB for k in range(150)]
    rows = step_rows([0.05] * 150, alloc=alloc)
    dev = [{"allocated": a, "cached": a + GIB, "peak": None, "total": 21 * GIB, "limit": int(21 * 1.7 * GIB)}
           for a in alloc]  # fmt: skip
    return build_session(env=_mac(), device="mps", rows=rows, mem=[mem_event(r[1], GIB, device=d) for r, d in zip(rows, dev, strict=True)])


def _crash(kind: str, env: dict[str, Any] | None = None) -> Callable[[], Session]:
    message, type_, _ = next(w for w in WORDINGS if w[2] == kind)
    return lambda: build_session(env=env or _mac(), device="mps", rows=step_rows([0.1] * 4),
                                 exception=crash(message, type_), returncode=1, loaders=[loader()])  # fmt: skip


SYNTHETIC: dict[str, Callable[[], Session]] = {
    "pin-memory-mps": _pin_memory,
    "cache-growth": _cache_growth,
    "near-device-limit": _near_limit,
    "memory-pressure": _pressure,
    "oom-crash-mps": _crash("oom_mps"),
    "oom-crash-cuda": _crash("oom_cuda", LINUX_ENV),
    "op-not-implemented-crash": _crash("not_implemented_mps"),
    "float64-mps-crash": _crash("float64_mps"),
    "bf16-macos-crash": _crash("bf16_macos", _mac(macos_version="13.6")),
    "mps-unavailable": lambda: build_session(env=_mac(mps_available=False, macos_version="13.6", torch="2.9.0")),
    "rosetta-python": lambda: build_session(
        env=_mac(mps_available=False, rosetta=True, machine="x86_64", torch="2.2.2")
    ),
    "intel-mac": lambda: build_session(env=_mac(apple_silicon=False, mps_available=False, machine="x86_64")),
    # step 0 compiles (torch.compile) for 40 s; the CLI case is tests/e2e/test_loops.py
    "long-first-step": lambda: build_session(rows=step_rows([40.0] + [0.05] * 30)),
}


@pytest.mark.parametrize("rule", sorted(SYNTHETIC))
def test_recorded_figures_fire_the_rule(rule):
    found = fired(SYNTHETIC[rule]())
    assert rule in found, sorted(found)
    finding = found[rule]
    assert "```python" in finding.fix and "{{" not in finding.fix


def test_a_step_0_spent_waiting_for_its_first_batch_is_no_compilation():
    """Sweep s52 a13 under spawn: 2 DataLoader workers started by spawn on a busy machine
    kept step 0 waiting 18.9 s of its 18.9 s for its first batch, and long-first-step said
    "Step 0 took 19 s (compilation)" with torch.compile advice to a script that compiles
    nothing. The same step 0 spent computing still fires the rule."""
    waiting = fired(build_session(rows=step_rows([19.0] + [0.05] * 30, waits=[18.9] + [0.0] * 30)))
    assert "long-first-step" not in waiting, sorted(waiting)
    computing = fired(build_session(rows=step_rows([19.0] + [0.05] * 30, waits=[0.2] + [0.0] * 30)))
    assert "long-first-step" in computing, sorted(computing)


def test_tensor_leak_on_mps_uses_the_allocated_bytes():
    found = fired(_mps_leak())["tensor-leak"]
    assert found.evidence.startswith("Memory held by tensors on the device grows by 3,072 KiB per step")
    assert found.first_step == 1


def test_recorded_figures_say_what_matters():
    cache = fired(_cache_growth())["cache-growth"]
    assert "empty_cache()" in cache.fix and "PYTORCH_MPS_HIGH_WATERMARK_RATIO=1.0" in cache.fix and "0.0" in cache.fix
    pressure = fired(_pressure())["memory-pressure"]
    assert "batch_size=32" in pressure.fix and "freeze" in pressure.fix
    oom = fired(SYNTHETIC["oom-crash-mps"]())["oom-crash-mps"]
    assert "256.00 MB" in oom.evidence and "18.13 GB" in oom.evidence and "freezes" in oom.fix
    cuda = fired(SYNTHETIC["oom-crash-cuda"]())["oom-crash-cuda"]
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in cuda.fix
    op = fired(SYNTHETIC["op-not-implemented-crash"]())["op-not-implemented-crash"]
    assert op.title == "aten::linalg_eig is not implemented for MPS"
    assert 'os.environ["PYTORCH_ENABLE_MPS_FALLBACK"] = "1"' in op.fix and "before `import torch`" in op.fix
    why = fired(SYNTHETIC["mps-unavailable"]())["mps-unavailable"]
    assert "older than 14.0" in why.evidence


def test_mps_memory_on_a_torch_before_2_5_keeps_what_it_can_read():
    """``torch.mps.recommended_max_memory`` came with torch 2.5 (pytorch/pytorch PR #128289;
    the torch.mps docs of 2.4 do not list it), and mpsprof supports torch 2.1+. The real
    ``MpsBackend`` code over a ``torch.mps`` without it: tensor and driver memory are read,
    the limit is not known (no figure made up), and the cache-growth finding still comes."""
    from types import SimpleNamespace

    from mpsprofiler.devices.mps import MpsBackend

    mps = SimpleNamespace(current_allocated_memory=lambda: 3 * GIB, driver_allocated_memory=lambda: 5 * GIB)
    backend = MpsBackend.__new__(MpsBackend)
    backend._torch = SimpleNamespace(mps=mps)
    figures = backend.memory()
    assert figures is not None
    assert (figures.allocated, figures.cached, figures.total, figures.limit) == (3 * GIB, 5 * GIB, None, None)
    mps.recommended_max_memory = lambda: 16 * GIB  # type: ignore[attr-defined]  # torch 2.5+
    figures = backend.memory()
    assert figures is not None and figures.total == 16 * GIB and figures.limit is not None
    assert "cache-growth" in fired(_cache_growth(recommended_max=None))


def test_a_cap_under_the_runs_own_peak_is_not_suggested():
    """The cache grew to 7.7 GiB on a GPU that recommends 5 GiB: under 1.7 x 5 GiB, so the run
    finished, but a cap of 1.0 (5 GiB) would stop it with an out-of-memory error. The fix says
    so instead of suggesting it, and neither `try` nor `patch` sets it."""
    from mpsprofiler.devices.mps_rules import assignments
    from mpsprofiler.experiment.candidates import FIXES

    session = _cache_growth(recommended_max=5 * GIB)
    diagnosis = diagnose(session)
    found = {f.rule: f for f in diagnosis.findings}["cache-growth"]
    assert "No lower watermark cap suits this run" in found.fix and "peaked at 1.53 x" in found.fix, found.fix
    assert not assignments(found.fix), found.fix
    assert FIXES["cache-growth"](dict(diagnosis.facts)) is None
    from mpsprofiler.patch.plan import plan

    (fix,) = plan(session, [found], dict(diagnosis.facts))
    assert fix.not_patched == ["not patched: no lower watermark cap suits this run (its MPS memory peaked at 1.53 x "
                               "the recommended working set)"] and not fix.files  # fmt: skip
    roomy = {f.rule: f for f in diagnose(_cache_growth()).findings}["cache-growth"]
    assert "PYTORCH_MPS_HIGH_WATERMARK_RATIO=1.0 PYTORCH_MPS_LOW_WATERMARK_RATIO=0.8" in roomy.fix, roomy.fix


def test_quiet_where_nothing_is_wrong():
    healthy_mac = fired(build_session(env=_mac(), device="mps", loaders=[loader()], rows=step_rows([0.05] * 30)))
    assert not {"mps-unavailable", "rosetta-python", "intel-mac", "pin-memory-mps"} & set(healthy_mac)
    assert "pin-memory-mps" not in fired(build_session(loaders=[loader(pin_memory=True)], rows=step_rows([0.05] * 10)))
    # on MPS a wait that found the device still busy cost nothing: no stall
    busy = build_session(env=_mac(), device="mps", loaders=[loader()],
                         rows=step_rows([0.04] * 30, waits=[0.02] * 30, idle=[0] * 30))  # fmt: skip
    idle = build_session(env=_mac(), device="mps", loaders=[loader()],
                         rows=step_rows([0.04] * 30, waits=[0.02] * 30, idle=[1] * 30))  # fmt: skip
    assert "dataloader-stall-critical" not in fired(busy) and "dataloader-stall-critical" in fired(idle)
    small = build_session(loaders=[loader()], rows=step_rows([0.04] * 30, waits=[0.004] * 30))
    assert not {"dataloader-stall", "dataloader-stall-critical"} & set(fired(small))
    roomy = FakeMpsBackend([(2 * GIB, 3 * GIB)], recommended_max=21 * GIB)
    rows = step_rows([0.1] * 20, alloc=[2 * GIB] * 20)
    flat = build_session(env=_mac(), device="mps", rows=rows,
                         mem=[mem_event(r[1], GIB, device=roomy.memory().as_dict()) for r in rows])  # fmt: skip
    assert not {"near-device-limit", "cache-growth", "tensor-leak", "memory-pressure"} & set(fired(flat))


# --------------------------------------------------------------------------- the files


def test_every_shipped_rule_is_triggered_by_a_test():
    ruleset = load_rules([RULES / name for name in RULE_FILES])
    ids = {rule.id for rule in ruleset}
    leak_sites = {"graph-kept-across-steps", "leak-site-graph", "leak-site-container",
                  "leak-site-small", "graph-list-between-steps"}  # tests/e2e/test_leaks.py
    loader = {"dataloader-batch-indexing", "dataloader-cpu-contention", "dataloader-handoff"}  # tests/e2e/test_loader_advice.py
    place = {"other-programs-busy"}  # tests/e2e/test_advice_place.py
    others = {"memory-taken-by-others"}  # tests/tui/test_flicker.py
    mac_env = {"mac-watermark-refused", "mac-fallback-aborts"}  # tests/e2e/test_mac_env.py
    anomaly = {"anomaly-detection-on"}  # tests/e2e/test_anomaly.py
    # tests/unit/test_loader_mac_respawn.py (the engine), tests/e2e/test_mac_respawn.py (the CLI)
    mac_respawn = {"worker-respawn-mac"}
    assert ids == (set(CLI_RULES) | set(SYNTHETIC) | {"tensor-leak"} | leak_sites | loader | place | others | mac_env
                   | anomaly | mac_respawn)


def test_rule_files_load_cleanly_with_reasons_for_their_thresholds():
    ruleset = load_rules([RULES / name for name in RULE_FILES])
    assert [str(e) for e in ruleset.errors] == []  # no errors, and no "numbers without a reason"
    for rule in ruleset:
        # the code to change: in the fix, or in a phrase of a fact the fix names (a stall's
        # `loader_change`, left out where the loader has the settings already)
        phrased = [t.source for name, table in rule.phrases.items() if "{" + name + "}" in rule.fix
                   for t in table.values()]  # fmt: skip
        assert "```python" in rule.fix or any("```python" in text for text in phrased), rule.id
        assert rule.references, rule.id
