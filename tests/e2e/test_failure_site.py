"""A failed probe instrument is reported once with WHERE it failed (issue 27 item 1):
the ``probe_error`` event carries ``where`` (``FILE:LINE in FUNC`` of mpsprof's frame
the exception passed through last, a path inside the package) next to the exception's
type and text, and the run's summary, its Markdown report and JSON summary show it."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import SCRIPTS, child_env, mpsprof_cli, read_events
from mpsprofiler.probe import probe as probe_module
from mpsprofiler.probe.failure_site import failure_fields, failure_site
from mpsprofiler.rundir import open_new


def test_the_site_is_mpsprof_s_innermost_frame(tmp_path: Path) -> None:
    """An OSError raised by ``open`` (C, no frame) inside mpsprof's own code names the
    line of ours that called it; one raised in no frame of ours names nothing."""
    try:
        open_new(tmp_path / "missing-dir" / "x")
    except OSError as exc:
        where = failure_site(exc)
        fields = failure_fields(exc)
    source, first = inspect.getsourcelines(open_new)
    lines = {first + i for i, text in enumerate(source) if "os.open(" in text or "open(" in text}
    assert where.startswith("mpsprofiler/rundir.py:") and where.endswith(" in open_new"), where
    assert int(where.split(":")[1].split()[0]) in lines
    assert fields["message"].startswith("FileNotFoundError: ") and fields["where"] == where
    try:
        json.loads("{")
    except ValueError as exc:
        assert failure_site(exc) == "" and "where" not in failure_fields(exc)


@pytest.mark.slow
def test_a_failed_instrument_is_reported_once_with_its_place(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    cmd = [sys.executable, str(SCRIPTS / "drive.py"), str(run_dir), json.dumps({"fault": ["backward"]}),
           str(SCRIPTS / "train_small.py")]
    proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, env=child_env(), timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    errors = [e for e in read_events(run_dir) if e["k"] == "probe_error"]
    assert len(errors) == 1 and errors[0]["instrument"] == "backward", errors
    source, first = inspect.getsourcelines(probe_module.Probe.fault)
    line = first + next(i for i, text in enumerate(source) if "raise RuntimeError" in text)
    where = f"mpsprofiler/probe/probe.py:{line} in fault"
    assert errors[0]["where"] == where
    assert errors[0]["message"] == "RuntimeError: injected fault in backward (test option)"
    shown = proc.stdout + proc.stderr
    assert shown.count(f"(at {where})") == 1, shown[-2000:]
    report = mpsprof_cli("report", str(run_dir), "--format", "md")
    assert report.stdout.count(f"(at `{where}`)") == 1, report.stdout[-3000:]
    summary = json.loads(mpsprof_cli("report", str(run_dir), "--format", "json").stdout)
    assert [e.get("where") for e in summary["probe_errors"]] == [where]
