"""Autograd's anomaly detection left on in training (``rules/anomaly-detection.yaml``): the
real script through the real CLI, its two forms found at their own lines, the reads its NaN
checks make not blamed on the backward line, and no finding where it is off in training
(a debugging check before the loop, or never on). The wrapper on ``torch.set_anomaly_enabled``
must pass every call on: the script's output and exit status are bare's."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from helpers import REPO, child_env, mpsprof_cli, read_summary
from mpsprofiler.probe import anomaly

SCRIPT = REPO / "tests" / "scripts_anomaly" / "anomaly_train.py"


def _line_of(text: str) -> int:
    """The script's last line that holds ``text`` (read, not written down: the script may
    change; the last: the training loop's, after the one-off debugging check)."""
    found = [n for n, line in enumerate(SCRIPT.read_text().splitlines(), 1) if text in line]
    assert found, text
    return found[-1]


def _run(tmp_path: Path, form: str) -> tuple[subprocess.CompletedProcess[str], dict[str, dict[str, str]]]:
    run = tmp_path / form
    proc = mpsprof_cli("run", "--headless", "-o", str(run), str(SCRIPT), "--form", form, env=child_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc, {f["rule"]: f for f in read_summary(run)["findings"]}


Recording = tuple[Path, Path, "subprocess.CompletedProcess[str]"]
"""A copy of the script, its run directory and the ``mpsprof run`` that recorded it."""


@pytest.fixture(scope="module")
def recorded_on(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Recording]:
    """The script with anomaly detection on in training, each form copied and recorded once
    (``FORM/anomaly_train.py``, run ``FORM/run``): (script, run, the run's process). The
    finding's test reads the recording; the patch test patches and applies it to that copy
    and runs the patched copy again (it was a second run of the same script and form)."""
    done: dict[str, Recording] = {}

    def recorded(form: str) -> Recording:
        if form not in done:
            base = tmp_path_factory.mktemp(f"anomaly_{form}")
            script, run = base / SCRIPT.name, base / "run"
            script.write_text(SCRIPT.read_text())
            proc = mpsprof_cli("run", "--headless", "-o", str(run), str(script), "--form", form, env=child_env())
            done[form] = (script, run, proc)
        return done[form]

    return recorded


def _bare(form: str) -> str:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--form", form], capture_output=True, text=True,
                          env=child_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("form,text", [("set", "torch.autograd.set_detect_anomaly(True)"),
                                       ("with", "with torch.autograd.detect_anomaly():")])
def test_anomaly_detection_on_in_training_is_named_at_its_line(recorded_on: Callable[[str], Recording], form: str,
                                                              text: str) -> None:
    _, run, proc = recorded_on(form)
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = {f["rule"]: f for f in read_summary(run)["findings"]}
    assert _bare(form).strip() in proc.stdout  # the training's own output, as bare
    finding = found["anomaly-detection-on"]
    where = f"anomaly_train.py:{_line_of(text)}"
    assert where in finding["evidence"] and text in finding["evidence"], finding["evidence"]
    if form == "set":
        assert "torch.autograd.set_detect_anomaly(False)" in finding["fix"], finding["fix"]
    else:
        assert "Remove the `with` at" in finding["fix"] and where in finding["fix"], finding["fix"]
    sync = found.get("sync-heavy-mac")
    if sync is not None:  # the NaN checks' reads: not the backward line's to change
        assert "anomaly detection checking every backward op" in sync["fix"], sync["fix"]
        assert "keep per-step values on the device" not in sync["fix"], sync["fix"]
        refs = " ".join(sync["references"])  # anomaly detection's sources, not the other variants'
        assert "anomaly-detection" in refs and not any(s in refs for s in ("huggingface", "lbfgs", "distributions"))


@pytest.mark.slow
@pytest.mark.parametrize("form", ["debug_once", "off"])
def test_no_finding_where_it_is_off_while_training(tmp_path: Path, form: str) -> None:
    proc, found = _run(tmp_path, form)
    assert _bare(form).strip() in proc.stdout
    assert "anomaly-detection-on" not in found, found.keys()


@pytest.mark.filterwarnings("ignore:Anomaly Detection has been enabled")
def test_the_wrapper_passes_every_call_on_and_records_the_callers_line() -> None:
    calls: list[BaseException] = []
    before = torch.is_anomaly_enabled()
    uninstall = anomaly.install(calls.append)
    anomaly.SITES.sites.clear()
    try:
        with torch.autograd.detect_anomaly(check_nan=False):
            assert torch.is_anomaly_enabled() and not torch.is_anomaly_check_nan_enabled()
            reading = anomaly.reading()
        assert not torch.is_anomaly_enabled() and anomaly.reading() is None
        for _ in range(2):
            torch.autograd.set_detect_anomaly(True)
        assert torch.is_anomaly_enabled()
        torch.autograd.set_detect_anomaly(False)
    finally:
        uninstall()
        torch.set_anomaly_enabled(before)
    assert torch.set_anomaly_enabled is not None and "anomaly" not in getattr(torch.set_anomaly_enabled,
                                                                             "__module__", "")
    assert reading is not None and reading["check_nan"] is False
    here = Path(__file__).resolve()
    sites = [(Path(s["file"]).resolve(), s["calls"], s["check_nan"]) for s in anomaly.SITES.sites]
    assert [(f, c) for f, c, _ in sites] == [(here, 1), (here, 2)], sites  # the with, then the set line (twice)
    assert not calls


@pytest.mark.slow
@pytest.mark.parametrize("form", ["set", "with"])
def test_the_override_try_runs_keeps_it_off_and_says_so(tmp_path: Path, form: str) -> None:
    """``--set torch.detect_anomaly=false`` (what ``try`` runs for the finding): the script's
    switch is passed on as off, the run says what it changed, the finding is gone."""
    run = tmp_path / "off"
    proc = mpsprof_cli("run", "--headless", "-o", str(run), "--set", "torch.detect_anomaly=false", str(SCRIPT),
                       "--form", form, env=child_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "anomaly False" in proc.stdout  # the script's own reading at its end
    summary = read_summary(run)
    assert "anomaly-detection-on" not in {f["rule"] for f in summary["findings"]}
    assert "torch.detect_anomaly" in json.dumps(summary), "the change is recorded"


def test_try_offers_the_override_for_the_finding_and_only_false_is_accepted() -> None:
    from mpsprofiler.experiment.candidates import candidate_for
    from mpsprofiler.settings import SettingError, parse_settings

    cand = candidate_for({"rule": "anomaly-detection-on", "title": "t", "facts": {"anomaly_on": True}})
    assert cand is not None and cand.settings == parse_settings(["torch.detect_anomaly=false"])
    assert cand.text == "torch.detect_anomaly=false"
    with pytest.raises(SettingError):
        parse_settings(["torch.detect_anomaly=true"])


@pytest.mark.slow
@pytest.mark.parametrize("form", ["set", "with"])
def test_patch_turns_it_off_at_the_line_and_the_patched_script_runs_clean(recorded_on: Callable[[str], Recording],
                                                                         tmp_path: Path, form: str) -> None:
    script, run, proc = recorded_on(form)  # the finding's own recording (its test above reads it)
    assert proc.returncode == 0, proc.stderr[-2000:]
    proc = mpsprof_cli("patch", str(run), "--apply", "--no-proof", env=child_env())
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    text = script.read_text()
    if form == "set":
        assert "\n    torch.autograd.set_detect_anomaly(False)\n" in text, text
        assert "\n    torch.autograd.set_detect_anomaly(True)\n" not in text, text
    else:  # the loop's with is gone, its backward one level out; the one-off debugging check stays
        assert text.count("with torch.autograd.detect_anomaly():") == 1, text
        assert "\n        loss.backward()\n    opt.step()" in text, text
    again = tmp_path / "again"
    proc = mpsprof_cli("run", "--headless", "-o", str(again), str(script), "--form", form, env=child_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "anomaly-detection-on" not in {f["rule"] for f in read_summary(again)["findings"]}


@pytest.mark.slow
def test_lightning_s_detect_anomaly_is_named_at_the_script_s_trainer_and_patched_there(tmp_path: Path) -> None:
    """``L.Trainer(detect_anomaly=True)``: the switch is Lightning's call, the line to change is
    the script's Trainer (run in the frameworks stage, where Lightning is installed)."""
    pytest.importorskip("lightning")
    script = tmp_path / "pl_anomaly.py"
    script.write_text((REPO / "tests" / "scripts_frameworks" / "pl_anomaly.py").read_text())
    run = tmp_path / "run"
    proc = mpsprof_cli("run", "--headless", "-o", str(run), str(script), cwd=tmp_path, env=child_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    finding = {f["rule"]: f for f in read_summary(run)["findings"]}["anomaly-detection-on"]
    line = next(n for n, text in enumerate(script.read_text().splitlines(), 1) if "L.Trainer(" in text)
    assert f"pl_anomaly.py:{line}" in finding["evidence"] and "Lightning" in finding["evidence"], finding["evidence"]
    assert "detect_anomaly=False" in finding["fix"], finding["fix"]
    proc = mpsprof_cli("patch", str(run), "--apply", "--no-proof", cwd=tmp_path, env=child_env())
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "detect_anomaly=False, accelerator" in script.read_text(), script.read_text()
