"""A Linux run whose DataLoader workers fork again at every epoch is told what that costs on
a Mac, where they spawn (rules/worker-respawn.yaml, worker-respawn-mac; analyzers/loader_mac.py).

tests/scripts_loader/early_stop_epochs.py: an early-stopping loop of short epochs with 2
workers, not persistent, the start method left to the platform. Forked restarts cost
milliseconds here; on macOS each starts new interpreters that import torch and the script.
The prediction is priced from the run's own ``import torch`` (CPU seconds, the ``env``
event's ``torch_import_cpu_s``) and said once: by worker-respawn-mac, or, where the forked
restarts already cost worker-respawn's share here (a busy machine), in worker-respawn's
evidence. A loader kept alive or read once gets no word of it.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from helpers import child_env, fix_code, line_of, mpsprof_cli, read_events, read_summary

SCRIPT = Path(__file__).resolve().parent.parent / "scripts_loader" / "early_stop_epochs.py"
MAC_WORDS = "On a Mac"


def _run(tmp: Path, name: str, *args: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    run = tmp / name
    proc = mpsprof_cli("run", "--headless", "-o", str(run), str(SCRIPT), *args, cwd=tmp, env=child_env(), timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return read_summary(run), read_events(run)


def _words(finding: dict[str, Any]) -> str:
    """Where a finding says it is about a Mac: worker-respawn-mac's title ("On a Mac, ..."),
    worker-respawn's evidence (its sentence on the Mac's figure)."""
    return finding["title"] + " " + finding["evidence"]


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the prediction is for a run whose workers fork")
def test_forked_restarts_every_epoch_get_the_macs_cost_and_the_loaders_line(tmp_path: Path) -> None:
    runs = {"restarts": ("--epochs", "6", "--samples", "256", "--step-ms", "60"),
            "persistent": ("--epochs", "6", "--persistent"), "once": ("--epochs", "1")}
    with ThreadPoolExecutor(3) as pool:
        done = {name: pool.submit(_run, tmp_path, name, *args) for name, args in runs.items()}
        results = {name: future.result() for name, future in done.items()}

    summary, events = results["restarts"]
    imported = [e["torch_import_cpu_s"] for e in events if e["k"] == "env" and "torch_import_cpu_s" in e]
    assert imported and imported[-1] > 0, "the probe timed no import torch"
    (loader,) = summary["dataloaders"]
    restarts = loader["first_fetches"] - 1  # 6 passes during the steps: the first starts its workers anyway
    said = [f for f in summary["findings"] if f["rule"] in ("worker-respawn", "worker-respawn-mac")
            and MAC_WORDS in _words(f)]
    assert len(said) == 1, [(f["rule"], f["evidence"]) for f in summary["findings"]]  # once, not twice
    (finding,) = said
    assert abs(finding["facts"]["mac_respawn_cost_s"] - restarts * imported[-1]) < 1e-3, (finding["facts"], restarts)
    words = " ".join(finding["evidence"].split())
    assert f"{imported[-1]:.2f} s" in words, words
    line = line_of(SCRIPT, "loader = DataLoader(")
    assert f"early_stop_epochs.py:{line}" in finding["fix"] and "persistent_workers=True" in fix_code(finding), finding["fix"]
    if finding["rule"] == "worker-respawn-mac":
        assert "spawn" in words and "Python 3.8" in words and "torch/utils/data/dataloader.py" in words, words

    for clean in ("persistent", "once"):  # kept alive, or read in one pass: nothing restarts
        summary, _ = results[clean]
        assert not [f for f in summary["findings"] if f["rule"] == "worker-respawn-mac" or MAC_WORDS in _words(f)], \
            (clean, [f["rule"] for f in summary["findings"]])
