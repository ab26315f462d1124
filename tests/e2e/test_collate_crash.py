"""A dataset of samples of different shapes under the default collate_fn
(``collate-unequal-crash``): the finding says why the batch could not be made, and its
fix, pasted as written, trains. Real script, real CLI."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from helpers import REPO, mpsprof_cli, read_summary

SCRIPT = REPO / "tests" / "scripts_loader" / "variable_lengths.py"


def _run(tmp_path: Path, *args: str) -> tuple[int, dict]:
    run = tmp_path / ("run" + "".join(args).replace("-", "_"))
    proc = mpsprof_cli("run", "--headless", "-o", str(run), str(SCRIPT), *args)
    return proc.returncode, {f["rule"]: f for f in read_summary(run)["findings"]}


@pytest.mark.slow
def test_samples_of_different_lengths_are_told_as_collate_s_and_the_padding_fix_trains(tmp_path: Path) -> None:
    """The run stopped at "stack expects each tensor to be equal size" (in a worker: "Trying
    to resize storage that is not resizable") with the generic "Fix the RuntimeError at
    <the for line>", a line with nothing to fix. Now the collate finding; the script with
    the fix's collate_fn (the same code) trains; the script's own torch.stack of unequal
    tensors stays the generic crash."""
    cases = [(), ("--workers", "2"), ("--pad",), ("--own-stack",)]
    with ThreadPoolExecutor(2) as pool:
        (rc0, in_process), (rc2, workers), (rc_pad, padded), (rc_own, own) = pool.map(
            lambda a: _run(tmp_path, *a), cases)
    assert rc0 == rc2 == rc_own == 1 and rc_pad == 0
    for found in (in_process, workers):
        assert "collate-unequal-crash" in found and "crash" not in found, found
    fix = in_process["collate-unequal-crash"]["fix"]
    source = SCRIPT.read_text().splitlines()
    snippet = [line for line in fix.split("```python\n", 1)[1].split("```", 1)[0].splitlines() if line.strip()]
    missing = [line for line in snippet if line not in source]
    assert snippet and not missing, missing  # the script's --pad collate_fn is the fix as written
    assert not {r for r in padded if r.endswith("crash")}, padded
    assert "collate-unequal-crash" not in own and "crash" in own, own
