"""Every batch is in the per-loader sums, though they are folded off the training thread.

The DataLoader hook appends one record a batch to a log that the probe's channel thread
folds into the loaders' sums at its wakes (probe/loader_sites.py, issue 34): the last records
are folded at exit, a crash's too, and a fork-started worker (which inherits the log and
the hooks) adds nothing. A real run through the CLI: the counts are the script's own, known
batch for batch (an iterator's first batch is counted apart, as ``first_fetches``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import child_env, mpsprof_cli
from mpsprofiler.session.recording import load_run

SCRIPT = Path(__file__).resolve().parent.parent / "scripts_loader" / "fold_counts.py"


def _loaders(run_dir: Path, *args: str) -> tuple[int, list[dict]]:
    proc = mpsprof_cli("run", "--headless", "-o", str(run_dir), str(SCRIPT), *args, env=child_env(), timeout=300)
    session = load_run(run_dir).session
    loaders = sorted((dict(v) for v in session.dataloaders.values()), key=lambda d: d["created"])
    return proc.returncode, loaders


@pytest.mark.slow
def test_every_batch_of_two_loaders_is_counted_once(tmp_path: Path) -> None:
    code, (train, side) = _loaders(tmp_path / "run")
    assert code == 0
    # two passes of 256 and of 32 batches; each pass's first batch apart
    assert (train["iters"], train["first_fetches"], train["fetches"]) == (2, 2, 2 * 255), train
    assert (side["iters"], side["first_fetches"], side["fetches"]) == (2, 2, 2 * 31), side
    assert train["fetch_s"] > 0 and side["fetch_s"] > 0
    assert side["batch_tensors"] == 2 and side["batch_form"] == "pair", side


@pytest.mark.slow
def test_a_crash_in_the_middle_of_a_pass_loses_no_batch(tmp_path: Path) -> None:
    code, (train, side) = _loaders(tmp_path / "crash", "crash")
    assert code == 1  # the script's own exit status
    # the first pass whole, then 151 batches of the second (the 151st was taken, then the crash)
    assert (train["iters"], train["first_fetches"], train["fetches"]) == (2, 2, 255 + 150), train
    assert (side["iters"], side["fetches"]) == (1, 31), side
