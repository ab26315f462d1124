"""The cross-rank rules of rules/distributed.yaml that the straggler tests leave out:
``data-loading-imbalance`` and ``rank-near-memory-limit``.

``data-loading-imbalance`` is the quieter finding for ranks whose input pipelines differ
while no single rank holds the job back. With two ranks that cannot happen: DDP evens
their step times, so a difference in wait share is one rank's extra wait per step, and
the straggler threshold (10% of the step) is below the rule's (15%); the recorded
two-rank run shows it named as a straggler instead. Four ranks, three of them waiting
for a slow dataset and one not, are the imbalance without a straggler (each slow rank
waits as long as the median of the others): real torchrun runs through the CLI, timed,
so serial.

``rank-near-memory-limit`` compares each rank's peak against its limit: on CUDA the
allocator's peak against total x ``set_per_process_memory_fraction``, on the CPU the
process's RSS against the machine's memory. No GPU here, and a test must not fill the
machine's memory: the figures are recorded per-rank events, the device figures read by
the real CUDA backend from a stubbed ``torch.cuda``; the real 2-GPU run is marked multigpu.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from helpers import child_env, mpsprof_cli, read_summary
from mpsprofiler import events
from mpsprofiler.devices.cuda import CudaBackend
from mpsprofiler.diagnosis import diagnose
from mpsprofiler.diagnosis.engine import Diagnostic, evaluate
from mpsprofiler.diagnosis.findings import Finding
from mpsprofiler.diagnosis.rules import load_rules
from mpsprofiler.session.recording import load_run
from mpsprofiler.session.session import Session
from tests.unit.test_analyzers import GIB, LINUX_ENV, MIB, mem_event, step_rows, steps_event

TESTS = Path(__file__).resolve().parent.parent
SCRIPTS = TESTS / "scripts_dist"
RECORDINGS = TESTS / "fixtures" / "recordings"
DISTRIBUTED = TESTS.parent / "rules" / "distributed.yaml"
RANKS = 4
STEPS = 24


def fired(session: Session) -> dict[str, Finding]:
    diagnosis = diagnose(session)
    assert diagnosis.facts["analyzer_errors"] == []
    return {f.rule: f for f in diagnosis.findings}


# --------------------------------------------------------------------------- per-rank events


def rank_lines(rank: int, *, device: str, rows: list[list[Any]], mem: list[bytes], env: dict[str, Any] | None = None,
               world: int = 2) -> list[bytes]:  # fmt: skip
    """One rank's recorded events, as its probe sends them: each line carries ``r``."""
    lines = [
        events.encode(events.KIND_HELLO, 0.0, schema=events.SCHEMA_VERSION, pid=4242 + rank, rank=rank,
                      local_rank=rank, world_size=world),  # fmt: skip
        events.encode(events.KIND_ENV, 0.01, **(env or LINUX_ENV)),
        events.encode(events.KIND_MODEL, 0.9, device=device, device_kind=device.split(":")[0], parameters=1000,
                      dtypes=["float32"], optimizer="SGD"),  # fmt: skip
        steps_event(rows),
        *mem,
    ]
    out = []
    for line in lines:
        event = events.decode(line)
        fields = {k: v for k, v in event.data.items() if k not in ("k", "ts")}
        out.append(events.encode(event.kind, event.ts, **fields, r=rank))
    return out


def job(*ranks: list[bytes]) -> list[bytes]:
    """The launcher's lines around the ranks' (``run`` first, ``exit`` last, no rank)."""
    run = events.encode(events.KIND_RUN, 0.0, script="train.py", target="train.py", module=False, argv=["train.py"],
                        cwd="/home/u/proj", mode="headless", started=1767225600.0)  # fmt: skip
    end = events.encode(events.KIND_EXIT, 60.0, returncode=0, duration=60.0)
    return [run, *(line for lines in ranks for line in lines), end]


def session_of(lines: list[bytes]) -> Session:
    session = Session()
    session.feed_many(events.decode(line) for line in lines)
    return session


# --------------------------------------------------------------------------- memory limit


class StubCuda:
    """The parts of ``torch.cuda`` the CUDA backend reads, with one rank's figures: a GPU
    of ``total`` bytes limited to ``fraction`` of it (``set_per_process_memory_fraction``)."""

    def __init__(self, total: int, fraction: float, peak: int) -> None:
        self.total, self.fraction, self.peak = total, fraction, peak
        self.memory = SimpleNamespace(get_per_process_memory_fraction=lambda dev: self.fraction)

    def is_initialized(self) -> bool:
        return True

    def current_device(self) -> int:
        return 0

    def memory_allocated(self, dev: int) -> int:
        return self.peak - 64 * MIB  # below the peak between steps

    def memory_reserved(self, dev: int) -> int:
        return self.peak + 32 * MIB

    def max_memory_allocated(self, dev: int) -> int:
        return self.peak

    def get_device_properties(self, dev: int) -> SimpleNamespace:
        return SimpleNamespace(total_memory=self.total)


GPU = 80 * GIB
FRACTION = 0.05
LIMIT = int(GPU * FRACTION)  # 4 GiB each, as torch.cuda.set_per_process_memory_fraction(0.05) gives
CUDA_ENV = dict(LINUX_ENV, cuda_available=True, cuda_device_count=2, cuda_device_name="NVIDIA H100")


def cuda_rank(rank: int, peak_share: float) -> list[bytes]:
    """A CUDA rank whose allocator peaked at ``peak_share`` of its limit; the memory
    samples are what the real CUDA backend reads from it."""
    backend = CudaBackend(rank)
    backend._torch = SimpleNamespace(cuda=StubCuda(GPU, FRACTION, int(LIMIT * peak_share)))
    figures = backend.memory()
    assert figures is not None and figures.limit == LIMIT
    rows = step_rows([0.1] * 20, alloc=[figures.allocated] * 20)
    mem = [mem_event(row[1], 3 * GIB, device=figures.as_dict()) for row in rows[::4]]
    return rank_lines(rank, device=f"cuda:{rank}", rows=rows, mem=mem, env=CUDA_ENV)


def near_limit_lines() -> list[bytes]:
    return job(cuda_rank(0, 0.60), cuda_rank(1, 0.93))


def test_rank_near_its_memory_limit_is_named() -> None:
    finding = fired(session_of(near_limit_lines()))["rank-near-memory-limit"]
    assert finding.severity == "warning"
    assert finding.title == "Rank 1 is close to its memory limit"
    assert finding.facts["rank_peak_limit_rank"] == 1
    assert finding.facts["rank_peak_limit_share"] == pytest.approx(0.93, abs=1e-6)
    assert finding.evidence.startswith(
        "Rank 1 peaked at 93% of its memory limit; the largest rank uses 1.55x the memory of the smallest.")
    rows = {line.split("|")[1].strip(): line for line in finding.evidence.splitlines() if line.startswith("| ")}
    assert rows["0"].endswith("| 2.4 GiB |") and rows["1"].endswith("| 3.7 GiB |"), finding.evidence
    assert "DistributedSampler(drop_last=True)" in finding.fix and "{" not in finding.fix


def test_ranks_with_room_are_quiet() -> None:
    session = session_of(job(cuda_rank(0, 0.60), cuda_rank(1, 0.60)))
    diagnosis = diagnose(session)
    assert diagnosis.facts["rank_peak_limit_share"] == pytest.approx(0.60, abs=1e-6)
    assert "rank-near-memory-limit" not in {f.rule for f in diagnosis.findings}
    # one rank: no cross-rank rule at all, however full it is
    alone = session_of(job(cuda_rank(0, 0.95)))
    assert "rank-near-memory-limit" not in fired(alone)


def test_on_the_cpu_the_limit_is_the_machines_memory() -> None:
    """No device: a rank's RSS (with its workers) against the machine's memory."""
    def cpu_rank(rank: int, rss: int) -> list[bytes]:
        rows = step_rows([0.1] * 20)
        mem = [mem_event(row[1], rss, total=16 * GIB, available=GIB) for row in rows[::4]]
        return rank_lines(rank, device="cpu", rows=rows, mem=mem)

    full = fired(session_of(job(cpu_rank(0, int(14.6 * GIB)), cpu_rank(1, GIB))))["rank-near-memory-limit"]
    assert full.title == "Rank 0 is close to its memory limit"
    assert full.evidence.startswith("Rank 0 peaked at 91% of its memory limit; the largest rank uses 14.60x")
    assert "rank-near-memory-limit" not in fired(session_of(job(cpu_rank(0, 4 * GIB), cpu_rank(1, 4 * GIB))))


@pytest.mark.slow
def test_report_of_the_recording_shows_the_rank(tmp_path: Path) -> None:
    """The recorded events through ``mpsprof report``: what a user reads."""
    (tmp_path / "events.jsonl").write_bytes(b"".join(near_limit_lines()))
    proc = mpsprof_cli("report", str(tmp_path), "--format", "md", timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "Rank 1 is close to its memory limit" in proc.stdout
    assert "Rank 1 peaked at 93% of its memory limit" in proc.stdout
    doc = json.loads(mpsprof_cli("report", str(tmp_path), "--format", "json", timeout=60).stdout)
    found = next(f for f in doc["findings"] if f["rule"] == "rank-near-memory-limit")
    assert found["facts"]["rank_peak_limit_rank"] == 1


@pytest.mark.multigpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
@pytest.mark.parametrize(("fills", "fires"), [("0.5,0.93", True), ("0.6,0.6", False)])
def test_two_gpus_rank_near_its_limit(tmp_path: Path, fills: str, fires: bool) -> None:
    """Each rank limited with set_per_process_memory_fraction; rank 1 fills 93% of its limit."""
    run_dir = tmp_path / "run"
    proc = mpsprof_cli("run", "--headless", "-o", str(run_dir), "--nproc-per-node", "2",
                       str(SCRIPTS / "ddp_rank_memory.py"), env=child_env(FILLS=fills), timeout=300, stdin=None)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = read_summary(run_dir)
    found = {f["rule"]: f for f in summary["findings"]}
    facts = diagnose(load_run(run_dir).session).facts
    if fires:
        finding = found["rank-near-memory-limit"]
        assert finding["title"] == "Rank 1 is close to its memory limit"
        assert 0.90 <= finding["facts"]["rank_peak_limit_share"] < 1.0
        assert "Rank 1 peaked at 9" in finding["evidence"]
    else:
        assert "rank-near-memory-limit" not in found
        assert 0.5 <= facts["rank_peak_limit_share"] < 0.90


# --------------------------------------------------------------------------- data loading


def waiting_rank(rank: int, wait: float, step: float = 0.040) -> list[bytes]:
    """A CPU rank of a DDP job: every step takes ``step`` seconds (the all-reduce evens
    them), ``wait`` of it waiting for its DataLoader."""
    return rank_lines(rank, device="cpu", rows=step_rows([step] * STEPS, waits=[wait] * STEPS), mem=[], world=RANKS)


def test_two_ranks_waiting_unevenly_are_a_straggler() -> None:
    """The recorded two-rank run: rank 1's dataset is slow. The difference in wait share
    is rank 1's extra wait per step over the job's step, so the straggler is named, and
    the imbalance rule, for pipelines that differ with no straggler, stays quiet."""
    diagnosis = diagnose(load_run(RECORDINGS / "ddp_straggler").session)
    facts = diagnosis.facts
    assert facts["rank_wait_share_spread"] >= 0.15
    assert facts["straggler_rank"] == 1 and facts["straggler_share"] >= 0.10
    rules = {f.rule for f in diagnosis.findings}
    assert "straggler-rank" in rules and "data-loading-imbalance" not in rules


def test_recorded_waits_are_an_imbalance_without_a_straggler() -> None:
    """Three ranks wait 30 ms of a 40 ms step, one does not: each waiting rank waits as
    long as the median of the others, so none is a straggler; the facts are the rule's."""
    facts = diagnose(session_of(job(*(waiting_rank(r, 0.030 if r < 3 else 0.0) for r in range(RANKS))))).facts
    assert facts["rank_count"] == RANKS
    assert facts["rank_wait_share_spread"] == pytest.approx(0.75)
    assert facts.get("straggler_rank") is None


def _why_not(facts: dict[str, Any]) -> list[Diagnostic]:
    """What the engine says of the distributed rules on these facts (shown on failure)."""
    diags: list[Diagnostic] = []
    evaluate(load_rules([DISTRIBUTED]), facts, "cpu", diagnostics=diags)
    return [d for d in diags if d.rule == "data-loading-imbalance"]


def test_recorded_uneven_waits_fire_the_imbalance() -> None:
    session = session_of(job(*(waiting_rank(r, 0.030 if r < 3 else 0.0) for r in range(RANKS))))
    uneven = fired(session)
    assert "data-loading-imbalance" in uneven, (sorted(uneven), _why_not(diagnose(session).facts))
    assert uneven["data-loading-imbalance"].evidence.startswith(
        "The share of step time spent waiting for data differs by 75% between ranks.")
    assert not {"straggler-rank", "straggler-rank-work"} & set(uneven)


def test_recorded_even_waits_are_quiet() -> None:
    even = session_of(job(*(waiting_rank(r, 0.030) for r in range(RANKS))))
    facts = diagnose(even).facts
    assert facts["rank_wait_share_spread"] == pytest.approx(0.0)
    # quiet because the spread is small (with straggler_rank present as None, too)
    assert [f.rule for f in evaluate(load_rules([DISTRIBUTED]), {**facts, "straggler_rank": None}, "cpu")] == []


def _loader_run(base: Path, name: str, slow_ranks: str) -> dict[str, Any]:
    run_dir = base / name
    proc = mpsprof_cli("run", "--headless", "-o", str(run_dir), "--nproc-per-node", str(RANKS),
                       str(SCRIPTS / "ddp_uneven_loaders.py"),
                       env=child_env(SLOW_RANKS=slow_ranks, STEPS=str(STEPS)), timeout=240)  # fmt: skip
    summary = read_summary(run_dir, missing_ok=True)
    facts = diagnose(load_run(run_dir).session).facts if (run_dir / "events.jsonl").exists() else {}
    return {"proc": proc, "summary": summary, "facts": facts, "run_dir": run_dir}


@pytest.fixture(scope="module")
def loader_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """The same four-rank script twice, one after the other: ranks 0-2 read a slow
    dataset (30 ms a batch) and rank 3 a fast one; then every rank the slow one."""
    base = tmp_path_factory.mktemp("rank_loaders")
    return {"uneven": _loader_run(base, "uneven", "0,1,2"), "even": _loader_run(base, "even", "all")}


def _ran(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    proc: subprocess.CompletedProcess[str] = run["proc"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "trained" in proc.stdout
    assert [r["rank"] for r in run["summary"]["ranks"]] == list(range(RANKS))
    return {f["rule"]: f for f in run["summary"]["findings"]}


def _explain(run: dict[str, Any]) -> str:
    facts = {k: v for k, v in run["facts"].items() if k.startswith(("rank_", "straggler_", "job_", "others_"))}
    return json.dumps(facts, indent=0, default=str)[:4000]


@pytest.mark.slow
@pytest.mark.serial
@pytest.mark.xdist_group("test_rank_rules.py")
def test_uneven_loaders_are_an_imbalance_without_a_straggler(loader_runs) -> None:
    """The real run is the case the rule describes: the waits differ, the steps do not."""
    run = loader_runs["uneven"]
    found = _ran(run)
    facts = run["facts"]
    session = load_run(run["run_dir"]).session
    assert all(s.steps.count == STEPS for s in session.ranks.values())
    assert facts["rank_wait_share_spread"] >= 0.40, _explain(run)  # ~0.75 measured: 30 ms of a 40 ms step
    assert facts["rank_step_spread"] < 0.10, _explain(run)  # the all-reduce evens the steps
    assert facts.get("straggler_rank") is None, _explain(run)
    assert not {"straggler-rank", "straggler-rank-work"} & set(found)


@pytest.mark.slow
@pytest.mark.serial
@pytest.mark.xdist_group("test_rank_rules.py")
def test_uneven_loaders_fire_data_loading_imbalance(loader_runs) -> None:
    run = loader_runs["uneven"]
    found = _ran(run)
    assert "data-loading-imbalance" in found, f"{sorted(found)} {_why_not(run['facts'])}\n{_explain(run)}"
    finding = found["data-loading-imbalance"]
    spread = finding["facts"]["rank_wait_share_spread"]
    assert finding["severity"] == "info" and finding["title"] == "Ranks wait for data unevenly"
    assert finding["evidence"].startswith(f"The share of step time spent waiting for data differs by {spread:.0%}")
    table = {line.split("|")[1].strip(): line.split("|") for line in finding["evidence"].splitlines()
             if line.startswith("| ") and line.split("|")[1].strip().isdigit()}  # fmt: skip
    assert sorted(table) == ["0", "1", "2", "3"]
    waits = {rank: float(cells[4].split()[0]) for rank, cells in table.items()}  # data wait / step, ms
    assert min(waits[r] for r in "012") > 20.0 > 5.0 > waits["3"], finding["evidence"]
    assert "(data-loading-imbalance)" in run["proc"].stderr  # in the summary a headless run prints


@pytest.mark.slow
@pytest.mark.serial
@pytest.mark.xdist_group("test_rank_rules.py")
def test_even_loaders_stay_quiet(loader_runs) -> None:
    run = loader_runs["even"]
    found = _ran(run)
    assert run["facts"]["rank_wait_share_spread"] < 0.15, _explain(run)
    assert not {"data-loading-imbalance", "straggler-rank", "straggler-rank-work"} & set(found)
