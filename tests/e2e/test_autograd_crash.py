"""Crashes inside backward(): graph-carried-crash, backward-twice-crash, inplace-modified-crash.

torch's two messages (torch/csrc/autograd/saved_variable.cpp, ``SavedVariable::unpack``) are
raised here by the installed torch, never copied; the state a loop carries is read from
scripts (analyzers/carried.py); the trigger scripts run through the real CLI, and each
fix, pasted into the script as the finding writes it, is run again: the carried-state
and two-losses scripts then train to the end, and anomaly detection names the forward
line of the in-place crash.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from helpers import child_env, mpsprof_cli, read_summary
from mpsprofiler.diagnosis.analyzers.carried import backward_calls, loop_at
from mpsprofiler.diagnosis.analyzers.crash import classify

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts_autograd"


def _raised(fn: Any) -> str:
    try:
        fn()
    except RuntimeError as exc:
        return str(exc)
    raise AssertionError("no error raised")


def _twice() -> None:
    w = torch.ones(2, requires_grad=True)
    loss = (w.sigmoid() * 2).sum()
    loss.backward()
    loss.backward()


def _inplace() -> None:
    w = torch.ones(2, requires_grad=True)
    g = w.sigmoid()
    g.mul_(2)
    g.sum().backward()


def test_torchs_own_messages_are_recognised() -> None:
    assert classify("RuntimeError", _raised(_twice)) == "backward_twice"
    assert classify("RuntimeError", _raised(_inplace)) == "inplace_modified"


def _carried(source: str, line_text: str) -> list[str]:
    tree = ast.parse(source)
    line = next(i for i, t in enumerate(source.splitlines(), 1) if line_text in t)
    loop = loop_at(tree, line)
    return [c.name for c in loop.carried] if loop else []


RNN = """
hidden = init()
for step, (x, y) in enumerate(batches):
    out, hidden = rnn(x, hidden)
    loss = crit(out, y)
    total = total + loss.item()
    i = i + 1
    loss.backward()
"""


@pytest.mark.parametrize(("source", "expected"), [
    (RNN, ["hidden"]),  # not the loop's own x, y, step; not a float sum; not a counter
    (RNN.replace("    out, hidden", "    hidden = hidden.detach()\n    out, hidden"), []),  # already cut
    (RNN.replace("    out, hidden", "    hidden = repackage_hidden(hidden)\n    out, hidden"), []),
    (RNN.replace("rnn(x, hidden)", "lstm(x, (h, c))").replace("out, hidden", "out, (h, c)"), ["h", "c"]),
    ("for x in xs:\n    running = running + model(x).sum()\n    running.backward()\n", ["running"]),
    ("while True:\n    self.h = self.cell(x, self.h)\n    loss = self.h.sum()\n    loss.backward()\n", ["self.h"]),
    ("for x in xs:\n    loss = model(x).sum()\n    loss.backward()\n", []),  # a clean loop carries nothing
])  # fmt: skip
def test_the_state_a_loop_carries_is_read_from_the_script(source: str, expected: list[str]) -> None:
    assert _carried(source, "backward()") == expected


def test_the_losses_backward_twice_are_read_from_the_loop() -> None:
    source = (SCRIPTS / "two_losses.py").read_text()
    line = next(i for i, t in enumerate(source.splitlines(), 1) if "loss_b.backward()" in t)
    assert [name for name, _ in backward_calls(ast.parse(source), line)] == ["loss_a", "loss_b"]


def _run(tmp: Path, script: Path, name: str, **env: str) -> tuple[Any, dict[str, Any]]:
    out = tmp / name
    proc = mpsprof_cli("run", "--headless", "-o", str(out), str(script), env=child_env(**env), timeout=240,
                       cwd=script.parent)
    return proc, read_summary(out)


def _finding(summary: dict[str, Any]) -> dict[str, Any]:
    found = [f for f in summary["findings"] if f["rule"].endswith("-crash")]
    assert len(found) == 1, [f["rule"] for f in summary["findings"]]
    return found[0]


def _line(script: Path, text: str) -> int:
    return next(i for i, t in enumerate(script.read_text().splitlines(), 1) if text in t)


def _code(fix: str) -> str:
    return re.findall(r"```python\n(.*?)```", fix, re.S)[0]


def _patched(tmp: Path, name: str, lines: list[str], **env: str) -> Any:
    """The script as the fix's lines made it, written to ``tmp/name`` and run plainly."""
    import subprocess

    script = tmp / name
    script.write_text("\n".join(lines) + "\n")
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240, cwd=tmp,
                          env=child_env(**env))


@pytest.fixture(scope="module")
def rnn_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Any, dict[str, Any], Path]]:
    """rnn_carried.py recorded without (``"0"``) and with (``"1"``) retain_graph=True."""
    runs = {}
    for retain in ("0", "1"):
        tmp = tmp_path_factory.mktemp(f"rnn{retain}")
        proc, summary = _run(tmp, SCRIPTS / "rnn_carried.py", "run", RETAIN=retain)
        runs[retain] = (proc, summary, tmp / "run")
    return runs


@pytest.mark.slow
@pytest.mark.parametrize("retain", ["0", "1"])
def test_a_carried_hidden_state_is_named_and_its_fix_trains(tmp_path: Path, retain: str, rnn_runs: Any) -> None:
    """Without retain_graph the second backward finds the freed graph; with torch's hint,
    retain_graph=True, it fails one way further on the weights optimizer.step() changed.
    Both are the hidden state carried with its history, named at its line."""
    script = SCRIPTS / "rnn_carried.py"
    proc, summary, _ = rnn_runs[retain]
    assert proc.returncode == 1, proc.stderr[-2000:]
    f = _finding(summary)
    assert f["rule"] == "graph-carried-crash", f["rule"]
    assign, loop = _line(script, "out, hidden = rnn("), _line(script, "for step in range(40):")
    assert f"`hidden` carries the last step's graph into this backward (rnn_carried.py:{assign})" in f["title"]
    assert f"The loop at rnn_carried.py:{loop} assigns `hidden`" in f["evidence"]
    said = "modified by an inplace operation" if retain == "1" else "Trying to backward through the graph a second time"
    assert said in " ".join(f["evidence"].split()), f["evidence"]
    # the fix as written: the helper after the imports, the cut as the loop's first line
    code = _code(f["fix"])
    helper, _, cut = code.partition("\n\n")
    lines = script.read_text().splitlines()
    assert cut.splitlines()[0] == lines[loop - 1]
    fixed = [*lines[:loop - 1], *cut.splitlines(), *lines[loop:]]
    imports = max(i for i, t in enumerate(fixed) if t.startswith(("import ", "from ")))
    fixed[imports + 1:imports + 1] = ["", *helper.splitlines()]
    done = _patched(tmp_path, "rnn_fixed.py", fixed, RETAIN=retain)
    assert done.returncode == 0 and "step 30 loss" in done.stdout, done.stderr[-2000:]


@pytest.mark.slow
def test_two_losses_each_with_a_backward_are_summed_and_then_train(tmp_path: Path) -> None:
    script = SCRIPTS / "two_losses.py"
    proc, summary = _run(tmp_path, script, "run")
    assert proc.returncode == 1
    f = _finding(summary)
    assert f["rule"] == "backward-twice-crash", f["rule"]
    assert f"at two_losses.py:{_line(script, 'loss_b.backward()')}" in f["title"]
    assert f"(from two_losses.py:{_line(script, 'loss_a.backward()')})" in " ".join(f["fix"].split())
    code = _code(f["fix"]).splitlines()
    assert code == ["loss = loss_a + loss_b", "loss.backward()"], code
    lines = script.read_text().splitlines()
    first, second = _line(script, "loss_a.backward()"), _line(script, "loss_b.backward()")
    indent = lines[first - 1][: len(lines[first - 1]) - len(lines[first - 1].lstrip())]
    fixed = [*lines[:first - 1], *(indent + c for c in code), *lines[second:]]
    done = _patched(tmp_path, "two_fixed.py", fixed)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.slow
def test_an_in_place_change_of_a_saved_tensor_is_found_by_the_fixs_anomaly_detection(tmp_path: Path) -> None:
    script = SCRIPTS / "inplace_forward.py"
    proc, summary = _run(tmp_path, script, "run")
    assert proc.returncode == 1
    f = _finding(summary)
    assert f["rule"] == "inplace-modified-crash", f["rule"]
    assert "(the output of `Sigmoid`)" in f["evidence"] and "version 1" in f["evidence"], f["evidence"]
    # the fix's line after `import torch`: torch then names the forward line whose output changed
    line = _code(f["fix"]).split("#")[0].strip()
    lines = script.read_text().splitlines()
    at = next(i for i, t in enumerate(lines) if t.startswith("import torch"))
    done = _patched(tmp_path, "anomaly.py", [*lines[:at + 1], line, *lines[at + 1:]])
    assert done.returncode == 1
    assert "g = torch.sigmoid(self.fc(x))" in done.stderr, done.stderr[-3000:]


@pytest.mark.slow
def test_a_loop_that_cuts_its_state_has_no_autograd_finding(tmp_path: Path) -> None:
    """The clean side: the same GRU loop with its state detached trains to the end."""
    source = (SCRIPTS / "rnn_carried.py").read_text().replace(
        "    out, hidden = rnn(", "    hidden = hidden.detach()\n    out, hidden = rnn(")
    clean = tmp_path / "rnn_clean.py"
    clean.write_text(source)
    proc, summary = _run(tmp_path, clean, "run")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not [f["rule"] for f in summary["findings"] if f["rule"].endswith("-crash")]


@pytest.mark.slow
def test_mpsprof_patch_writes_the_cut_and_proves_it(rnn_runs: Any) -> None:
    """``mpsprof patch --prove``: the helper after the imports and the cut first in the loop
    (libcst), and the proof runs the original (crashes here) and the patched copy (trains)."""
    script = SCRIPTS / "rnn_carried.py"
    as_written = script.read_text()
    proc, _, run = rnn_runs["0"]
    assert proc.returncode == 1
    patch = mpsprof_cli("patch", str(run), "--rule", "graph-carried-crash", "--prove", "--steps", "12",
                        env=child_env(), timeout=240, cwd=script.parent)
    assert patch.returncode == 0, patch.stderr[-3000:]
    added = [t[1:] for t in (run / "fix-graph-carried-crash.patch").read_text().splitlines()
             if t.startswith("+") and not t.startswith("+++")]
    assert "    hidden = repackage_hidden(hidden)" in added, added
    assert "def repackage_hidden(state):  # a tensor, or a tuple of them (an LSTM's (h, c))" in added, added
    out = patch.stdout + patch.stderr
    assert "proven: the original crashes here with graph-carried-crash and the patched script runs" in out, out[-3000:]
    assert script.read_text() == as_written  # the proof ran scratch copies: the user's file is untouched
