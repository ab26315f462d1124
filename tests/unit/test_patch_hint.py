"""The line ``mpsprof patch`` prints to apply a patch names the patch file as seen from the
directory it tells the user to run it in (the script's), not from the working directory:
``mpsprof run examples/train.py`` then ``cd examples && git apply mpsprof-runs/...`` named a
file that is not there."""

from __future__ import annotations

import os
from pathlib import Path

from mpsprofiler.patch.diff import describe
from mpsprofiler.patch.plan import Fix


def test_the_apply_line_names_the_patch_from_the_scripts_directory(tmp_path: Path) -> None:
    root = tmp_path / "proj" / "examples"
    root.mkdir(parents=True)
    patch = tmp_path / "proj" / "mpsprof-runs" / "run" / "fix-x.patch"
    patch.parent.mkdir(parents=True)
    patch.write_text("diff\n")
    text = describe(Fix(rule="x", title="t", changes=["a change"]), "diff --git a/t.py b/t.py\n", patch, None, str(root))
    line = next(ln for ln in text.splitlines() if "apply it from" in ln)
    named = line.split("git apply ", 1)[1].split()[0]
    assert named == os.path.join("..", "mpsprof-runs", "run", "fix-x.patch"), line
    assert (root / named).resolve() == patch.resolve()
