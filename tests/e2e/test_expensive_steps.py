"""Steps whose op sample is expensive (issue 34): the second early sample is left out of a
clean run, and taken when the first sampled step left a tensor alive, so a short run still
names the `.append` that keeps its graphs (probe/ops_schedule.py, ``EARLY_FREE_OPS``)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from helpers import child_env, mpsprof_cli, read_events, read_summary

SCRIPT = Path(__file__).parent.parent / "scripts_leaks" / "deep_history.py"


def _run(tmp_path: Path, keep: str) -> tuple[dict, list[dict]]:
    run_dir = tmp_path / keep
    proc = mpsprof_cli("run", "--headless", "-o", str(run_dir), str(SCRIPT), env=child_env(KEEP=keep))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return read_summary(run_dir), read_events(run_dir)


@pytest.mark.slow
def test_an_expensive_step_pays_one_early_sample_unless_a_tensor_stays(tmp_path: Path) -> None:
    with ThreadPoolExecutor(2) as pool:
        leaking, clean = pool.map(lambda keep: _run(tmp_path, keep), ["loss", "item"])
    (summary, events), (clean_summary, clean_events) = leaking, clean
    sampled = [e["step"] for e in events if e["k"] == "ops"]
    clean_sampled = [e["step"] for e in clean_events if e["k"] == "ops"]
    ops = sum(op["calls"] for op in next(e for e in clean_events if e["k"] == "ops")["ops"])
    assert ops > 1_000, ops  # the op count alone decides: the same on a loaded machine
    assert clean_sampled == [3], clean_sampled  # 60 steps: the budget allows no other
    assert not [f for f in clean_summary["findings"] if f["rule"].startswith("leak")], clean_summary["findings"]
    assert sampled[:2] == [3, 5], sampled
    leak = next(f for f in summary["findings"] if f["rule"] == "leak-site-graph")
    line = next(i for i, text in enumerate(SCRIPT.read_text().splitlines(), 1) if text.strip() == "history.append(loss)")
    assert f"deep_history.py:{line}" in leak["title"], leak["title"]
    assert "`history`" in leak["evidence"], leak["evidence"]
