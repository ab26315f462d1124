"""The DataLoader workers' CPU over the steady steps of a short run.

The memory sampler reads the workers' CPU totals every 0.5 s. A steady stretch under a
second (Lightning's 19 steady steps in tests/e2e/test_frameworks.py: 0.93 s) holds one
sample or two, by chance: with one, the workers read as not measured (the thread rule's
``unmeasured``), though samples lay 70 ms before the stretch and 2 ms after it. The
totals at the stretch's own start and end are read off the samples around each
(analyzers/loader_profile.py, ``_edges``), and agree with what all the samples say.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import child_env, mpsprof_cli
from mpsprofiler.diagnosis.analyzers import loader_profile
from mpsprofiler.diagnosis.facts import collect_facts
from mpsprofiler.session.recording import load_run

SCRIPT = Path(__file__).resolve().parent.parent / "scripts_core" / "sleepy_dataset.py"


def _workers_rate(run_dir: Path) -> tuple[float | None, str]:
    session = load_run(run_dir).session
    fig = loader_profile.measure(session, session.steps.steady, late=True)
    rate = fig.workers_cpu / fig.window_s if fig.workers_cpu is not None and fig.window_s else None
    return rate, collect_facts(session)["thread_workers_text"]


@pytest.mark.slow
def test_a_steady_stretch_with_one_sample_still_measures_its_workers(tmp_path: Path) -> None:
    """A real run with 2 workers (each batch sleeps 20 ms), then the same recording with
    every memory sample inside the steady steps dropped but the one nearest their middle:
    the workers' CPU is measured in both, about the same (cores: CPU seconds per second)."""
    full = tmp_path / "full"
    proc = mpsprof_cli("run", "--headless", "-o", str(full), str(SCRIPT), cwd=tmp_path,
                       env=child_env(WORKERS="2", STEPS="150", SLEEP="0.02", WORK="0.01"), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rate, said = _workers_rate(full)
    assert rate is not None and said in ("measured", "measured_one"), said

    session = load_run(full).session
    steady = session.steps.steady
    start, end = steady[0].end - steady[0].dur, session.steps.last_end or steady[-1].end
    lines = (full / "events.jsonl").read_text().splitlines()
    inside = [json.loads(x)["ts"] for x in lines if '"k":"mem"' in x and start <= json.loads(x)["ts"] <= end]
    assert len(inside) >= 2, inside  # the run had its samples there: the copy takes them away
    kept = min(inside, key=lambda ts: abs(ts - (start + end) / 2))
    one = tmp_path / "one"
    one.mkdir()
    (one / "events.jsonl").write_text("\n".join(
        x for x in lines if not ('"k":"mem"' in x and start <= json.loads(x)["ts"] <= end and json.loads(x)["ts"] != kept)
    ) + "\n")
    thinned, said_one = _workers_rate(one)
    assert said_one == said and thinned is not None, said_one
    assert abs(thinned - rate) <= 0.1 + 0.2 * rate, (thinned, rate)
