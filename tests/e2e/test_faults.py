"""Faults: a failing instrument, a killed or stopped parent, a killed child, a full or
unwritable disk. In every case the training runs on with the same output and status."""

from __future__ import annotations

import json
import re
import resource
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

from helpers import (
    SCRIPTS,
    Result,
    assert_same,
    child_env,
    mpsprof_cli,
    mpsprof_cmd,
    read_events,
    read_summary,
    run_mpsprof,
    run_python,
)
from mpsprofiler.session.recording import load_run

pytestmark = pytest.mark.slow  # every test starts real training processes under hostile conditions


INSTRUMENTS = ("env", "steps", "dataloader", "warnings", "memory", "ops")
FAULT_GROUPS = (("env", "warnings", "memory"), ("steps",), ("dataloader", "ops"))
"""Three runs instead of six: each leaves the instruments that show the others' effect."""


# -- a failing instrument ---------------------------------------------------------
@pytest.fixture(scope="module")
def faulted_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Result, Path]]:
    """train_small.py once under python and once per group of failing instruments."""
    base = tmp_path_factory.mktemp("faults")
    script = str(SCRIPTS / "train_small.py")

    def driven(group: tuple[str, ...]) -> tuple[Result, Path]:
        run_dir = base / "-".join(group)
        cmd = [sys.executable, str(SCRIPTS / "drive.py"), str(run_dir), json.dumps({"fault": list(group)}), script]
        started = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, stdin=subprocess.DEVNULL, env=child_env(), timeout=180)
        return Result(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started), run_dir

    with ThreadPoolExecutor(2) as pool:
        plain = pool.submit(run_python, [script])
        futures = {group: pool.submit(driven, group) for group in FAULT_GROUPS}
        runs = {name: f.result() for group, f in futures.items() for name in group}
        runs["plain"] = (plain.result(), base)
    return runs


@pytest.mark.slow
@pytest.mark.parametrize("instrument", INSTRUMENTS)
def test_failing_instrument_is_reported_once_and_harms_nothing(faulted_runs, instrument: str) -> None:
    plain, _ = faulted_runs["plain"]
    profiled, run_dir = faulted_runs[instrument]
    group = next(g for g in FAULT_GROUPS if instrument in g)
    assert plain.returncode == 0, plain.stderr
    assert_same(plain, profiled)  # same result of the training, same warnings shown
    evs = read_events(run_dir)
    errors = [e for e in evs if e["k"] == "probe_error"]
    assert sorted(e["instrument"] for e in errors) == sorted(group)  # once each
    mine = [e for e in errors if e["instrument"] == instrument][0]
    assert mine["message"] == f"RuntimeError: injected fault in {instrument} (test option)"
    assert f"instrument '{instrument}' was switched off" in profiled.summary_text
    kinds = [e["k"] for e in evs]
    steps = load_run(run_dir).session.steps
    if instrument == "steps":
        assert "model" not in kinds  # the optimizer hook is off ...
        assert steps.mode == "dataloader"  # ... the DataLoader still marks the steps
    else:
        assert steps.count == 16 and steps.mode == "optimizer"
    # the instruments that did not fail kept working
    for other, kind in (("env", "env"), ("memory", "mem"), ("ops", "ops"), ("warnings", "warning")):
        assert (kind in kinds) == (other not in group), (other, kind)
    if instrument == "dataloader":
        assert kinds.count("dataloader") == 1  # configured before it failed in __next__
        assert steps.total_wait == 0.0


# -- a killed or stopped parent -----------------------------------------------------
def _start_mpsprof(args: list[str], run_dir: Path) -> tuple[subprocess.Popen[bytes], psutil.Process]:
    # unbuffered: what readline() does not consume must be left for communicate()
    proc = subprocess.Popen(mpsprof_cmd(args, run_dir), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=child_env(), bufsize=0)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"ready\n"
    children = psutil.Process(proc.pid).children()
    assert len(children) == 1
    return proc, children[0]


def _ended(proc: psutil.Process, timeout: float) -> bool:
    """True once ``proc`` is gone or a zombie (an orphan may wait a while to be reaped)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                return True
        except (psutil.NoSuchProcess, ProcessLookupError):
            return True
        time.sleep(0.05)
    return False


BUSY = [str(SCRIPTS / "busy_steps.py"), "30000", "0.04", "3"]
"""30,000 steps in about 1.5 s, then exit status 3."""


@pytest.fixture(scope="module")
def busy_plain() -> Result:
    """BUSY under plain python, once: the output and status every faulted run must keep."""
    return run_python(BUSY)


def test_parent_killed_training_completes(tmp_path: Path, busy_plain: Result) -> None:
    """SIGKILL to mpsprof mid-run: the script runs to the end with its normal output (no
    BrokenPipeError from the dead event channel) and the recording reads back."""
    plain = busy_plain
    proc, child = _start_mpsprof(BUSY, tmp_path / "run")
    assert proc.stdout is not None
    seen = b""
    while not seen.endswith(b"progress 20000\n"):  # past the recorder's first flush (1 s)
        line = proc.stdout.readline()
        assert line, proc.stderr.read() if proc.stderr else b""
        seen += line
    events = tmp_path / "run" / "events.jsonl"
    deadline = time.monotonic() + 20  # a fast machine prints 20000 before the first flush
    while time.monotonic() < deadline and not (events.exists() and b"\n" in events.read_bytes()[:65536]):
        time.sleep(0.05)
    proc.kill()
    proc.wait(timeout=10)
    out, err = proc.communicate(timeout=60)  # EOF once the orphaned child has exited too
    assert _ended(child, 10)
    assert b"ready\n" + seen + out == plain.stdout
    assert err == plain.stderr == b""
    loaded = load_run(tmp_path / "run")  # readable up to its last flush
    assert loaded.session.run and loaded.session.hello and loaded.session.exit is None
    assert loaded.report.skipped == 0


# not serial: a blocked script never ends (60 s, then it fails whatever runs beside it); the
# 30 s bound is ten times the ~3 s it takes, with room for a second test on the machine
def test_parent_stopped_does_not_block_training(tmp_path: Path, busy_plain: Result) -> None:
    """A stopped mpsprof (SIGSTOP: nobody reads the event pipe) never blocks the script: it
    finishes while the parent is still stopped; resumed, the parent reports the run."""
    plain = busy_plain
    proc, child = _start_mpsprof(BUSY, tmp_path / "run")
    proc.send_signal(signal.SIGSTOP)
    try:
        started = time.monotonic()
        ended = _ended(child, 60)  # a zombie until its stopped parent reaps it
        waited = time.monotonic() - started
    finally:
        proc.send_signal(signal.SIGCONT)
    assert ended, "the training blocked while mpsprof was stopped"
    out, err = proc.communicate(timeout=60)
    assert waited < 30
    assert proc.returncode == plain.returncode == 3
    assert b"ready\n" + out == plain.stdout
    assert err.startswith(plain.stderr + b"\n\xe2\x94\x80\xe2\x94\x80 mpsprof")
    loaded = load_run(tmp_path / "run")
    assert loaded.session.exit is not None and loaded.session.exit.returncode == 3
    # nothing lost: what the full pipe could not take at exit came through the spill file
    assert loaded.session.steps.count == 30000
    summary = read_summary(tmp_path / "run")
    assert summary["steps"]["count"] == 30000 and summary["recording"] == {"complete": True, "problems": []}


# -- a killed child ---------------------------------------------------------------------
def test_child_killed_parent_still_reports(tmp_path: Path) -> None:
    proc, child = _start_mpsprof(BUSY, tmp_path / "run")
    time.sleep(0.5)
    child.kill()
    out, err = proc.communicate(timeout=60)
    text = err.decode()
    assert "killed by SIGKILL" in text and "run saved in" in text
    summary = read_summary(tmp_path / "run")
    assert summary["status"] == "crashed"
    assert isinstance(summary["findings"], list)
    exit_event = [e for e in read_events(tmp_path / "run") if e["k"] == "exit"][0]
    assert exit_event["returncode"] == -signal.SIGKILL and exit_event["signal_name"] == "SIGKILL"


# -- an unwritable or full disk -------------------------------------------------------
@pytest.mark.parametrize("where", ["proc", "under_a_file"])
def test_unwritable_run_directory(tmp_path: Path, where: str, busy_plain: Result) -> None:
    if where == "proc":
        run_dir = Path("/proc/mpsprof-forbidden/run")
    else:
        (tmp_path / "a_file").write_text("x")
        run_dir = tmp_path / "a_file" / "run"
    plain = busy_plain
    profiled = run_mpsprof(BUSY, run_dir)
    assert profiled.returncode == plain.returncode == 3
    assert profiled.stdout == plain.stdout
    text = profiled.stderr.decode()
    assert text.startswith(f"mpsprof: cannot write the run directory {run_dir}: ")
    assert "the run goes on without a recording" in text.splitlines()[0]
    assert "run saved in" not in text
    assert re.search(r"^steps\s+30000\b", text, re.M), text  # the summary, from the live events


def test_disk_full_mid_run(tmp_path: Path, busy_plain: Result) -> None:
    """A file-size limit on mpsprof (what a full disk looks like to it): one clear message,
    the training goes on with the same output and status, the partial recording reads back."""
    limit = 48 * 1024

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    plain = busy_plain
    proc = subprocess.run(mpsprof_cmd(BUSY, tmp_path / "run"), capture_output=True, stdin=subprocess.DEVNULL,
                          env=child_env(), timeout=120, preexec_fn=limited)
    assert proc.returncode == plain.returncode == 3
    assert proc.stdout == plain.stdout
    text = proc.stderr.decode()
    messages = [line for line in text.splitlines() if line.startswith("mpsprof:")]
    assert len(messages) == 1, text
    assert "recording stopped: File too large" in messages[0] and "the training continues" in messages[0]
    assert "Traceback" not in text and "run saved in" not in text
    assert (tmp_path / "run" / "events.jsonl").stat().st_size <= limit
    assert not (tmp_path / "run" / "summary.json").exists()
    loaded = load_run(tmp_path / "run")
    assert loaded.session.run["script"].endswith("busy_steps.py")


# -- events the probe cannot deliver --------------------------------------------------
def test_closed_channel_loses_nothing(tmp_path: Path) -> None:
    """The script closes every inherited descriptor mid-run: the probe notices and sends
    the rest through its spill file; every step is recorded and the run is complete."""
    script = [str(SCRIPTS / "closes_channel.py")]
    plain = run_python(script)
    profiled = run_mpsprof(script, tmp_path / "run")
    assert_same(plain, profiled)
    summary = read_summary(tmp_path / "run")
    assert summary["steps"]["count"] == 350
    assert summary["recording"]["complete"] is True
    assert "INCOMPLETE" not in profiled.summary_text


@pytest.fixture(scope="module")
def lost_events_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Result, Result, Path]:
    """closes_channel.py with no disk for the spill file: the later steps are lost."""
    run_dir = tmp_path_factory.mktemp("lost") / "run"
    script = [str(SCRIPTS / "closes_channel.py"), "nodisk"]
    return run_python(script), run_mpsprof(script, run_dir), run_dir


def test_lost_events_are_reported(lost_events_run) -> None:
    """The summary, the console and the reports say the recording is incomplete, and why."""
    plain, profiled, run_dir = lost_events_run
    assert_same(plain, profiled)
    summary = read_summary(run_dir)
    assert summary["steps"]["count"] < 350
    assert summary["recording"]["complete"] is False
    problem = summary["recording"]["problems"][0]
    assert problem.startswith("the script closed mpsprof's event channel")
    assert "finished, recording incomplete" in profiled.summary_text
    assert f"recording   INCOMPLETE: {problem}" in profiled.summary_text
    md = mpsprof_cli("report", str(run_dir))
    assert "finished, recording incomplete" in md.stdout.splitlines()[0]
    assert "**The recording is incomplete:** the script closed mpsprof" in md.stdout
    html = mpsprof_cli("report", str(run_dir), "--format", "html")
    assert "<strong>The recording is incomplete:</strong> the script closed mpsprof" in html.stdout


def test_lost_events_are_shown_in_the_tui(lost_events_run) -> None:
    import asyncio

    from mpsprofiler.tui.app import recorded_app
    from mpsprofiler.tui.widgets.header import RunHeader

    app = recorded_app(load_run(lost_events_run[2]))
    app.animation_level = "none"
    seen: list[str] = []

    async def main() -> None:
        async with app.run_test(size=(130, 40)) as pilot:
            await pilot.pause()
            seen.append(str(app.query_one(RunHeader).query_one("#hdr-status").render()))

    asyncio.run(main())
    assert "finished, recording incomplete" in seen[0]
