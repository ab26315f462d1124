"""A loader read in one pass gets workers, not ``persistent_workers=True``.

``persistent_workers`` keeps a loader's workers from one pass to the next
(torch/utils/data/dataloader.py: ``DataLoader.__iter__`` resets the one iterator it keeps).
A script that reads its loader once (one epoch, one stream through an ``IterableDataset``)
has no next pass: the stall fix that added it wrote an argument that changes nothing, told
of seeded runs changing "from the second epoch on" in a run of one epoch, and `mpsprof
patch` said the same finding "names no DataLoader argument to set" where the loader had its
workers already. The probe counts the iterators started over each loader (``iters``,
probe/loader_sites.py); a run that ended on its own with one of them is one pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import child_env, mpsprof_cli, read_summary
from mpsprofiler.diagnosis import diagnose
from mpsprofiler.experiment.candidates import candidate_for
from mpsprofiler.session.recording import load_run

SCRIPT = Path(__file__).resolve().parent.parent / "scripts_loader" / "one_pass.py"
STALLS = ("dataloader-stall", "dataloader-stall-critical")


def _profile(run_dir: Path, *args: str) -> tuple[dict, dict, dict]:
    proc = mpsprof_cli("run", "--headless", "-o", str(run_dir), str(SCRIPT), *args, env=child_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = read_summary(run_dir)
    session = load_run(run_dir).session
    (loader,) = session.dataloaders.values()
    stall = next(f for f in summary["findings"] if f["rule"] in STALLS)
    return stall, diagnose(session).facts, dict(loader)


@pytest.mark.slow
def test_a_loader_read_in_one_pass_gets_workers_without_persistent_workers(tmp_path: Path) -> None:
    stall, facts, loader = _profile(tmp_path / "one")
    assert loader["iters"] == 1, loader
    n = facts["suggested_num_workers"]
    assert n >= 2, facts
    code = stall["fix"].split("```python", 1)[1].split("```", 1)[0]
    assert f"num_workers={n}" in code and "persistent_workers" not in code, stall["fix"]
    assert "This run read the loader in one pass (one epoch)" in " ".join(stall["fix"].split()), stall["fix"]
    assert "from the second epoch on" not in stall["fix"], stall["fix"]
    # workers where there were none: a seeded run may change from its first batch, and the fix says so
    assert "Workers where there were none can change a seeded run from its first batch too" in " ".join(
        stall["fix"].split()), stall["fix"]
    change = candidate_for(stall, facts)  # what `mpsprof try` runs
    assert change is not None and change.settings["dataloader"] == {"1": {"num_workers": n}}, change
    patched = mpsprof_cli("patch", str(tmp_path / "one"), "--rule", stall["rule"], env=child_env(), timeout=120)
    assert f"one_pass.py:33: num_workers={n}\n" in patched.stdout, patched.stdout
    assert "persistent_workers" not in patched.stdout, patched.stdout


@pytest.mark.slow
def test_a_loader_read_in_several_passes_keeps_its_workers_with_persistent_workers(tmp_path: Path) -> None:
    """The clean side: three epochs over the same loader, three iterators: the fix keeps
    the workers between them, as before."""
    stall, facts, loader = _profile(tmp_path / "three", "3")
    assert loader["iters"] == 3, loader
    n = facts["suggested_num_workers"]
    code = stall["fix"].split("```python", 1)[1].split("```", 1)[0]
    assert f"num_workers={n}" in code and "persistent_workers=True" in code, stall["fix"]
    assert "one pass" not in stall["fix"], stall["fix"]
    change = candidate_for(stall, facts)
    assert change is not None and change.settings["dataloader"] == {"1": {"num_workers": n,
                                                                          "persistent_workers": True}}, change
