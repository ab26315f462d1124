"""A script that names a device this machine or torch build does not have (``device-missing-crash``):
a Mac script's ``"mps"`` on Linux, a CUDA tutorial's ``.cuda()`` on a Mac or a CPU build.

torch's own messages are classified (each one's source is in
``diagnosis/analyzers/crash.py``, ``MISSING_DEVICE``); the end-to-end tests run real
scripts against the installed torch, so the message is whatever this torch prints (they
skip where the device exists here). The fix and the patch rewrite the string that names
the device, where the script names it, into the choice of what the machine has; with no
string, ``.cuda()`` becomes ``.to(device)``. The patched scripts, profiled again, get no
finding: the clean counterpart of the trigger.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from mpsprofiler.diagnosis.analyzers.crash import classify, missing_device
from mpsprofiler.diagnosis.analyzers.device_choice import chooser, device_literals
from tests.e2e.test_patch import Recorded, _changed
from tests.helpers import REPO, child_env, mpsprof_cli

SCRIPTS = REPO / "tests" / "scripts_devices"


@pytest.mark.parametrize("message,device", [
    ("PyTorch is not linked with support for mps devices", "mps"),
    ("Could not run 'aten::empty.memory_format' with arguments from the 'MPS' backend. This could be because", "mps"),
    ("Torch not compiled with CUDA enabled", "cuda"),
    ("Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a driver", "cuda"),
    ("Could not run 'aten::_fft_r2c' with arguments from the 'MPS' backend.", None),  # an op, not the device
    ("Expected all tensors to be on the same device, but found at least two devices, mps:0 and cpu!", None),
])  # fmt: skip
def test_torchs_messages_for_a_missing_device(message: str, device: str | None) -> None:
    assert missing_device(message) == device
    assert (classify("RuntimeError", message) == "device_missing") == (device is not None)


def test_the_strings_that_choose_a_device_and_those_that_do_not() -> None:
    source = '''
import os, argparse, torch
a = torch.device("mps")
b = "mps"
x = torch.zeros(1).to("mps")
y = torch.zeros(1, device="mps:0")
p = argparse.ArgumentParser(); p.add_argument("--device", default="mps")
d = os.environ.get("DEVICE", "mps")
if a.type == "mps":
    print("mps", {"mps": 1})
w = torch.load("w.pt", map_location="cuda")
'''
    lines = [n.lineno for n in device_literals(ast.parse(source), "mps")]
    assert lines == [3, 4, 5, 6, 7, 8], lines
    assert [n.lineno for n in device_literals(ast.parse(source), "cuda")] == [11]


def test_the_choice_keeps_the_named_device_first_and_is_valid_python() -> None:
    for literal in ("mps", "cuda", "cuda:1"):
        expr = chooser(literal, "'")
        assert expr.startswith(f"'{literal}' if ") and expr.endswith("else 'cpu'"), expr
        assert eval(expr, {"torch": torch}) in (literal, "mps", "cuda", "cpu")  # noqa: S307 (our own expression)


def _profile_clean(repo: Path, script: str) -> list[str]:
    """The warnings and critical findings of the patched script profiled (a busy machine's
    info notes aside)."""
    run = repo / "run-after"
    proc = mpsprof_cli("run", "--headless", "-o", str(run), script, cwd=repo, env=child_env())
    assert proc.returncode == 0 and "done" in proc.stdout, proc.stderr[-3000:]
    return [f["rule"] for f in json.loads((run / "summary.json").read_text())["findings"] if f["severity"] != "info"]


MACHINE_NOTES = frozenset({"other-programs-busy", "memory-taken-by-others"})
"""Findings about the machine the run shared (a busy CI machine), not about the script."""


def _about_the_script(rules: list[str]) -> list[str]:
    return [r for r in rules if r not in MACHINE_NOTES]


def _the_finding(run: Path) -> dict[str, Any]:
    found = json.loads((run / "summary.json").read_text())["findings"]
    return next(f for f in found if f["rule"] == "device-missing-crash")


@pytest.mark.slow
@pytest.mark.skipif(torch.backends.mps.is_available(), reason="this machine has MPS: the script runs")
def test_a_mac_script_elsewhere_is_told_and_patched_where_it_names_mps(tmp_path: Path) -> None:
    rec = Recorded(tmp_path, SCRIPTS / "mac_script.py")
    assert _about_the_script(rec.rules) == ["device-missing-crash"], rec.rules
    finding = _the_finding(rec.run)
    named = next(i for i, t in enumerate(rec.script.read_text().splitlines(), 1) if 'torch.device("mps")' in t)
    assert f"The script names it once, at mac_script.py:{named}." in finding["evidence"], finding["evidence"]
    assert 'torch.device("mps" if torch.backends.mps.is_available() else' in finding["fix"], finding["fix"]
    removed, added = _changed(rec.check_applies_and_runs("device-missing-crash", tmp_path))
    assert removed == ['device = torch.device("mps")  # the Mac\'s GPU'], removed
    assert added == ['device = torch.device("mps" if torch.backends.mps.is_available() else "cuda" if '
                     'torch.cuda.is_available() else "cpu")  # the Mac\'s GPU'], added
    assert _profile_clean(tmp_path / "repo-device-missing-crash", "mac_script.py") == []


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: the script runs")
def test_a_cuda_tutorial_without_cuda_gets_to_device(tmp_path: Path) -> None:
    rec = Recorded(tmp_path, SCRIPTS / "cuda_tutorial.py")
    assert _about_the_script(rec.rules) == ["device-missing-crash"], rec.rules
    fix = _the_finding(rec.run)["fix"]
    assert "The script's `.cuda()` calls (cuda_tutorial.py:4, cuda_tutorial.py:7) become `.to(device)`." in fix, fix
    removed, added = _changed(rec.check_applies_and_runs("device-missing-crash", tmp_path))
    assert removed == ["model = nn.Linear(8, 1).cuda()", "    x = randn(16, 8).cuda()"], removed
    assert added == ["import torch", 'device = torch.device("cuda" if torch.cuda.is_available() else "mps" if '
                     'torch.backends.mps.is_available() else "cpu")', "model = nn.Linear(8, 1).to(device)",
                     "    x = randn(16, 8).to(device)"], added
    assert _profile_clean(tmp_path / "repo-device-missing-crash", "cuda_tutorial.py") == []
