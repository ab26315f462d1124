"""A loader slow in its sampler is told to fix the sampler, not to add workers.

torch draws every batch's indices in the training process, with or without workers
(torch/utils/data/dataloader.py: ``_next_data`` and ``_try_put_index`` call
``_next_index``), so a ``BucketBatchSampler`` that takes 20 ms per batch keeps the
training waiting whatever ``num_workers`` is: the stall finding once said "try
num_workers=6", and ``mpsprof try`` measured it 1.1x slower at 5.6x the memory. Its twin,
slow in ``Dataset.__getitem__``, still gets the workers (they do take that over).
Real runs of tests/scripts_loader/slow_sampler.py through the real CLI.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from helpers import mpsprof_cli
from tests.e2e.test_loader_advice import SCRIPTS, STALLS, profile

SCRIPT = "slow_sampler.py"


def _line(text: str) -> int:
    """The line of slow_sampler.py that builds the loader holding ``text``."""
    lines = (SCRIPTS / SCRIPT).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if "DataLoader(" in line and text in line)


def _iter_line(cls: str) -> int:
    """The line of slow_sampler.py where class ``cls`` defines ``__iter__``."""
    lines = (SCRIPTS / SCRIPT).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"class {cls}("))
    return next(i for i, line in enumerate(lines[start:], start + 1) if "def __iter__" in line)


def _stall(summary: dict[str, Any]) -> dict[str, Any]:
    stalls = [f for f in summary["findings"] if f["rule"] in STALLS]
    assert len(stalls) == 1, [f["rule"] for f in summary["findings"]]
    return stalls[0]


@pytest.mark.serial
@pytest.mark.slow
@pytest.mark.parametrize(("slow", "workers", "kind", "name", "built"), [
    ("batch_sampler", "0", "batch sampler", "BucketBatchSampler", "batch_sampler=BucketBatchSampler"),
    ("batch_sampler", "2", "batch sampler", "BucketBatchSampler", "batch_sampler=BucketBatchSampler"),
    ("sampler", "0", "sampler", "SlowOrderSampler", "sampler=SlowOrderSampler"),
])
def test_a_slow_sampler_is_told_to_get_cheaper_not_to_add_workers(tmp_path: Path, slow: str, workers: str,
                                                                   kind: str, name: str, built: str) -> None:
    summary, facts = profile(tmp_path, SCRIPT, "--slow", slow, "--workers", workers, "--steps", "40")
    assert facts["loader_bound"] == "sampler", facts
    stall = _stall(summary)
    title, fix = stall["title"], " ".join(stall["fix"].split())
    assert f"its {kind} {name} takes" in title and "workers cannot take over" in title, title
    assert facts["reason_index_ms"] >= 15.0, facts  # 20 ms a batch, drawn in the training process
    # the DataLoader's line, the class to change and how
    assert f"{SCRIPT}:{_line(built)}" in stall["evidence"], stall["evidence"]
    assert f"drawing its indices from the {kind} `{name}`" in fix, fix
    # the class's __iter__, where its time goes (the probe reads it from the code object)
    at = re.compile(rf"its `__iter__` is at \S*{re.escape(SCRIPT)}:{_iter_line(name)}\)")
    evidence = " ".join(stall["evidence"].split())
    assert at.search(evidence) and at.search(fix), (evidence, fix)
    if workers != "0":  # no "each of the 2 workers takes ~54 ms per batch": the workers wait for the indices
        assert "workers takes" not in evidence and "worker takes" not in evidence, evidence
        assert f"draws each batch's indices from the {kind} `{name}`" in evidence, evidence
    assert f"class {name}(Sampler[" in stall["fix"] and "built here once" in stall["fix"], stall["fix"]
    # no workers anywhere: not in the title, not in the code, not in a trial
    assert "num_workers" not in title and "num_workers=" not in fix, (title, fix)
    assert facts["suggested_num_workers"] == int(workers) and not facts["num_workers_helps"], facts
    if slow == "batch_sampler" and workers == "0":
        proc = mpsprof_cli("try", str(tmp_path / "run"), timeout=60)
        assert proc.returncode != 0 and "no finding" in proc.stderr, proc.stderr[-2000:]


@pytest.mark.serial
@pytest.mark.slow
def test_a_slow_getitem_twin_still_gets_workers(tmp_path: Path) -> None:
    summary, facts = profile(tmp_path, SCRIPT, "--slow", "getitem", "--steps", "40")
    assert facts["loader_bound"] == "waiting", facts
    stall = _stall(summary)
    n = facts["suggested_num_workers"]
    assert n >= 2 and f"try num_workers={n}" in stall["title"], stall["title"]
    assert "sampler" not in stall["title"]
