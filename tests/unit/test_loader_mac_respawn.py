"""The Mac prediction for forked DataLoader worker restarts (analyzers/loader_mac.py, rule
worker-respawn-mac): priced from this run's timed ``import torch``, only where the start
method is Linux's default fork, and said once (the measured worker-respawn covers the rest)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mpsprofiler.diagnosis.analyzers.loader_mac import mac_respawn
from mpsprofiler.diagnosis.engine import evaluate
from mpsprofiler.diagnosis.rules import builtin_rules_dir, load_rules

SCRIPT = "from torch.utils.data import DataLoader\nloader = DataLoader(data, batch_size=16, num_workers=2)\n"


def _session(tmp: Path, total_s: float = 20.0, platform: str = "linux", imported: float = 0.7,
             **loader_fields: Any) -> Any:
    script = tmp / "train.py"
    script.write_text(SCRIPT)
    loader = {"file": str(script), "line": 2, "created": 1, "num_workers": 2, "persistent_workers": False,
              "first_fetches": 20, "first_fetch_s": 0.4, "fetches": 60, "fetch_s": 0.06, "iters": 20, **loader_fields}
    return SimpleNamespace(dataloaders={1: loader}, run={"cwd": str(tmp)}, steps=SimpleNamespace(total_dur=total_s),
                           env={"platform": platform, "python": "3.11", "torch_import_cpu_s": imported})


def _fired(facts: dict[str, Any]) -> list[str]:
    rules = load_rules([builtin_rules_dir() / "worker-respawn.yaml"])
    return [f.rule for f in evaluate(rules, facts, "cpu")]


def test_twenty_forked_passes_are_priced_as_nineteen_spawns_at_the_loaders_line(tmp_path: Path) -> None:
    facts = mac_respawn(_session(tmp_path), {})
    assert facts["mac_respawn_restarts"] == 19 and facts["mac_respawn_passes"] == 20, facts
    assert abs(facts["mac_respawn_cost_s"] - 19 * 0.7) < 1e-6, facts
    assert abs(facts["mac_respawn_share"] - 13.3 / 33.3) < 1e-3, facts  # of the Mac's steps: 20 s + 13.3 s
    assert facts["mac_respawn_fix"] == "persistent_line" and facts["mac_respawn_place"] == "train.py:2", facts
    assert "persistent_workers=True" in facts["mac_respawn_code"], facts
    (finding,) = [f for f in evaluate(load_rules([builtin_rules_dir() / "worker-respawn.yaml"]), facts, "cpu")]
    assert finding.rule == "worker-respawn-mac", finding
    assert "about 13.3 s in all, 40% of the steps' time" in " ".join(finding.evidence.split()), finding.evidence
    assert "at train.py:2" in finding.fix and "persistent_workers=True" in finding.fix, finding.fix


def test_the_import_time_is_shown_as_measured_not_rounded_twice(tmp_path: Path) -> None:
    """The probe times ``import torch`` to 4 decimals (0.9346 s); the fact was rounded to 3
    (0.935) and the text to 2 from that: "0.94 s" for a 0.93 s import (a CI run's e2e test
    caught it). The fact keeps the measured figure, and the text rounds it once."""
    facts = mac_respawn(_session(tmp_path, imported=0.9346), {})
    assert facts["mac_respawn_start_s"] == 0.9346, facts
    (finding,) = [f for f in evaluate(load_rules([builtin_rules_dir() / "worker-respawn.yaml"]), facts, "cpu")]
    assert "Importing torch took this process 0.93 s of CPU" in " ".join(finding.evidence.split()), finding.evidence


def test_a_measured_restart_finding_covers_it(tmp_path: Path) -> None:
    """Forked restarts that already cost 5% here: worker-respawn says it, with the Mac's
    figure in its evidence; no second finding."""
    measured = {"workers_respawn_each_epoch": True, "respawn_share": 0.2}
    facts = {**mac_respawn(_session(tmp_path), measured), **measured}
    rules = load_rules([builtin_rules_dir() / "worker-respawn.yaml"])
    (finding,) = evaluate(rules, facts, "cpu")
    assert finding.rule == "worker-respawn", finding
    words = " ".join(finding.evidence.split())
    assert "On a Mac each of these restarts would wait at least 0.70 s more" in words and "13.3 s in all" in words, words


@pytest.mark.parametrize("platform, fields", [
    ("linux", {"first_fetches": 1, "iters": 1}),  # built once, read once
    ("linux", {"persistent_workers": True}),
    ("linux", {"multiprocessing_context": "fork"}),  # the script chose fork: a Mac forks too
    ("linux", {"start_method_set": "spawn"}),  # spawned already: measured by worker-respawn
    ("linux", {"num_workers": 0}),
    ("darwin", {}),  # on the Mac itself the restarts are measured
    ("linux", {"first_fetches": 2, "after_first_fetches": 1}),  # the 2nd pass began after the steps
])
def test_no_prediction_where_nothing_restarts_the_mac_way(tmp_path: Path, platform: str, fields: dict[str, Any]) -> None:
    assert mac_respawn(_session(tmp_path, platform=platform, **fields), {}) == {}


def test_a_few_restarts_in_a_long_run_are_not_worth_a_finding(tmp_path: Path) -> None:
    facts = mac_respawn(_session(tmp_path, total_s=600.0, first_fetches=3), {})  # 2 x 0.7 s of 600 s
    assert facts["mac_respawn_share"] < 0.05 and _fired(facts) == [], facts
