"""``mpsprof patch`` never gives a loader workers that would break the script on macOS:
there workers start by spawn and re-import the script, so training at the top level would
start again in every worker ("the current process has finished its bootstrapping
phase"). The patch puts that code under ``if __name__ == "__main__":`` with the workers,
or, where it cannot, writes neither and says where the guard goes.

Spawn is forced the way a Mac has it by default: a ``sitecustomize`` on the patched
script's PYTHONPATH that calls ``multiprocessing.set_start_method("spawn", force=True)``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO, Recorded, child_env

SCRIPTS = REPO / "tests" / "scripts_patch"


def _stall(rec: Recorded) -> str:
    return next(r for r in rec.rules if r.startswith("dataloader-stall"))


def _spawn_env(tmp: Path) -> dict[str, str]:
    site = tmp / "spawnsite"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text('import multiprocessing\nmultiprocessing.set_start_method("spawn", force=True)\n')
    return child_env(PYTHONPATH=os.pathsep.join((str(site), str(REPO))))


def _run(script: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, script.name], cwd=script.parent, capture_output=True, text=True, env=env,
                          timeout=300)


@pytest.mark.slow
def test_workers_for_a_top_level_loop_come_with_the_guard_and_train_under_spawn(tmp_path: Path) -> None:
    rec = Recorded(tmp_path, SCRIPTS / "toplevel_zip.py")
    rule = _stall(rec)
    original = rec.script.read_text()
    bare = _run(rec.script, child_env())
    assert bare.returncode == 0 and bare.stdout.count("epoch") == 3, bare.stderr[-2000:]

    # a line after the loop that reads what the loop made cannot stay above the guard: neither
    # edit is written, and the words say where the guard goes (lines kept as recorded: appended)
    stat = rec.script.stat()
    rec.script.write_text(original + "last_loss = loss\n")
    os.utime(rec.script, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    refused = rec.patch("--rule", rule, "--apply", "--no-proof")
    assert rec.script.read_text() == original + "last_loss = loss\n"
    assert "num_workers=" not in rec.script.read_text()
    assert re.search(r"not patched: num_workers=\d+, persistent_workers=True at toplevel_zip\.py:22: with workers "
                     r"the top-level code \(toplevel_zip\.py:19 to line 31\) must run under `if __name__", refused.stdout), \
        refused.stdout
    assert "line 32 comes after the top-level code (lines 19 to 31)" in refused.stdout, refused.stdout
    rec.script.write_text(original)
    os.utime(rec.script, ns=(stat.st_atime_ns, stat.st_mtime_ns))

    applied = rec.patch("--rule", rule, "--apply", "--no-proof")
    assert applied.returncode == 0, applied.stderr[-2000:]
    assert 'the training (lines 19 to 31) under `if __name__ == "__main__":`' in applied.stdout, applied.stdout
    patched = rec.script.read_text()
    assert "    dl2 = DataLoader(SlowPairs(), batch_size=16, num_workers=" in patched
    assert patched.index("class SlowPairs") < patched.index('if __name__ == "__main__":')  # workers unpickle it
    spawned = _run(rec.script, _spawn_env(tmp_path))
    assert spawned.returncode == 0, spawned.stderr[-3000:]
    # the same training as the patched script started by fork (Linux's default): the guard
    # changes nothing else; the first epoch as the original's (persistent workers draw their
    # base seed from torch's generator once, not at each epoch, so later shuffles differ)
    forked = _run(rec.script, child_env())
    assert forked.returncode == 0 and spawned.stdout == forked.stdout, forked.stderr[-2000:]
    assert spawned.stdout.splitlines()[0] == bare.stdout.splitlines()[0]


@pytest.mark.slow
def test_a_guarded_script_gets_its_loader_line_only(tmp_path: Path) -> None:
    rec = Recorded(tmp_path, SCRIPTS / "guarded_loader.py")
    diff = rec.diff(_stall(rec))
    removed = [x for x in diff.splitlines() if x.startswith("-") and not x.startswith("---")]
    added = [x for x in diff.splitlines() if x.startswith("+") and not x.startswith("+++")]
    assert removed == ["-    loader = DataLoader(SlowRows(), batch_size=16, shuffle=True)"], diff
    # the one call, on its line or wrapped one argument a line where the change makes it
    # longer than 100 columns (patch/cst/calls.py)
    call = " ".join(x[1:].strip() for x in added)
    assert added[0].startswith("+    loader = DataLoader(") and call.endswith(")"), diff
    assert "num_workers=" in call and "persistent_workers=True" in call, diff
    assert "__main__" not in diff
