"""A fix that shows the script's own call rewritten keeps the comments written in it.

The fix text rebuilds the statement at the line the probe recorded with the changed
arguments (diagnosis/analyzers/source_edit.py, ``rewrite_call``). Rebuilt from the
arguments alone, a call written over lines lost every comment in it (what ``batch_size=8``
was for, a note on the setting left for later): the user was shown their own call with
their notes gone, and `mpsprof patch` (libcst) kept them, so the two differed. A call
written over lines with comments keeps its text now, the change made where the argument
is, a new one after the last argument at its indent."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from helpers import child_env, fix_code, mpsprof_cli, read_summary
from mpsprofiler.diagnosis.analyzers.source_edit import rewrite_call

SCRIPT = Path(__file__).resolve().parent.parent / "scripts_loader" / "commented_call.py"
STALLS = ("dataloader-stall", "dataloader-stall-critical")


@pytest.mark.slow
def test_a_stall_fix_shows_the_scripts_commented_call_with_its_comments(tmp_path: Path) -> None:
    proc = mpsprof_cli("run", "--headless", "-o", str(tmp_path / "run"), str(SCRIPT), env=child_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stall = next(f for f in read_summary(tmp_path / "run")["findings"] if f["rule"] in STALLS)
    code = fix_code(stall)
    found = re.search(r"^    num_workers=(\d+),$", code, re.M)
    assert found is not None and int(found.group(1)) >= 2, code
    n = int(found.group(1))
    lines = code.splitlines()
    for comment in ("SlowReads(),  # 480 samples, read from disk", "batch_size=8,  # what fits on the small GPU",
                    "# num_workers: tune once the model is right"):
        assert any(line.strip() == comment for line in lines), code
    # the new argument after the last one written, at its indent, before the closing note
    assert lines.index("    shuffle=True,") < lines.index(f"    num_workers={n},") < lines.index(
        "    # num_workers: tune once the model is right"), code
    ast.parse(code.split("\n\n# ", 1)[0])  # what the user pastes is Python


@pytest.mark.parametrize("written, changes, want", [
    # the closing ``)`` on the last argument's line: the new one on that line, after it
    ("x = DataLoader(ds,  # the data\n               batch_size=4)\n", {"num_workers": "2"},
     "x = DataLoader(ds,  # the data\n               batch_size=4, num_workers=2)"),
    # no comma after the last argument: one before its comment
    ("x = DataLoader(\n    ds,\n    batch_size=4  # small\n)\n", {"num_workers": "2", "batch_size": "8"},
     "x = DataLoader(\n    ds,\n    batch_size=8,  # small\n    num_workers=2\n)"),
    # a parenthesised last argument, a trailing comma
    ("x = DataLoader(\n    (ds),  # wrapped\n)\n", {"num_workers": "2"},
     "x = DataLoader(\n    (ds),  # wrapped\n    num_workers=2,\n)"),
])
def test_a_commented_call_keeps_its_layout(tmp_path: Path, written: str, changes: dict[str, str], want: str) -> None:
    script = tmp_path / "s.py"
    script.write_text(written)
    rewrite = rewrite_call(str(script), 1, ("DataLoader",), changes)
    assert rewrite is not None and rewrite.after == want, rewrite
    ast.parse(rewrite.after)
