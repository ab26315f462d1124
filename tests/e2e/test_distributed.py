"""Distributed runs through torchrun on CPU (gloo, 2 ranks): one session, per-rank figures."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from helpers import child_env, mpsprof_cli, mpsprof_cmd, read_summary
from mpsprofiler.results import build_results
from mpsprofiler.session.recording import load_run

pytestmark = pytest.mark.slow
SCRIPTS = Path(__file__).parent.parent / "scripts_dist"
ENV = child_env()


def mpsprof(*args: str) -> subprocess.CompletedProcess[str]:
    return mpsprof_cli("run", "--headless", *args, env=ENV, timeout=180)


@pytest.fixture(scope="module")
def straggler_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("dist") / "run"
    proc = mpsprof("-o", str(run_dir), "--nproc-per-node", "2", str(SCRIPTS / "ddp_straggler.py"))
    return proc, run_dir


@pytest.mark.serial
def test_one_summary_with_both_ranks_and_the_straggler(straggler_run):
    proc, run_dir = straggler_run
    assert proc.returncode == 0, proc.stderr
    assert "trained" in proc.stdout
    summary = read_summary(run_dir)
    session = load_run(run_dir).session
    assert sorted(session.ranks) == [0, 1]
    assert all(s.steps.count == 30 for s in session.ranks.values())
    straggler = next(f for f in summary["findings"] if f["rule"] == "straggler-rank")
    assert straggler["facts"]["straggler_rank"] == 1
    assert straggler["facts"]["straggler_cause"] == "data wait"
    assert "Rank 1" in straggler["title"]
    # rank 0's own loader is fast: no stall reported for it
    stalls = [f for f in summary["findings"] if f["rule"].startswith("dataloader-stall")]
    assert all(f["title"].startswith("rank 1:") for f in stalls)


@pytest.mark.serial
def test_recording_replays_to_the_same_findings(straggler_run):
    _, run_dir = straggler_run
    summary = read_summary(run_dir)
    replay = build_results(load_run(run_dir).session).document()
    assert [f["rule"] for f in replay["findings"]] == [f["rule"] for f in summary["findings"]]


def test_exit_status_is_the_launchers(tmp_path):
    script = str(SCRIPTS / "ddp_fail.py")
    plain = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", script],
                           capture_output=True, text=True, env=ENV, timeout=180)
    profiled = mpsprof("-o", str(tmp_path / "run"), "--", "torchrun", "--standalone", "--nproc-per-node", "2", script)
    assert plain.returncode != 0
    assert profiled.returncode == plain.returncode


def test_ctrl_c_stops_every_rank(tmp_path):
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(mpsprof_cmd([str(SCRIPTS / "ddp_long.py")], run_dir, ["--nproc-per-node", "2"]),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, stdin=subprocess.DEVNULL)
    events = run_dir / "events.jsonl"
    descendants: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:  # wait until both ranks are stepping
            text = events.read_text() if events.exists() else ""
            if '"k":"steps"' in text and '"r":0' in text and '"r":1' in text:
                break
            time.sleep(0.3)
        descendants = psutil.Process(proc.pid).children(recursive=True)
        assert len(descendants) >= 3  # torchrun and two ranks
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode != 0
        gone, alive = psutil.wait_procs(descendants, timeout=10)
        assert not alive, f"ranks left running: {alive}"
        assert "rank 0 interrupted" in out and "rank 1 interrupted" in out
    finally:  # a failure above must not leave the job training beside the rest of the suite (it never ends)
        if proc.poll() is None:
            try:
                descendants += psutil.Process(proc.pid).children(recursive=True)
            except psutil.NoSuchProcess:
                pass
        for left in descendants:  # first: they hold mpsprof's output pipes open
            try:
                left.kill()
            except psutil.NoSuchProcess:
                pass
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=60)


@pytest.mark.serial
def test_recordings_of_several_nodes_merge(straggler_run, tmp_path):
    """Each node records its own ranks; report/view merge the recordings into one job."""
    from mpsprofiler.session.recording import load_runs

    _, run_dir = straggler_run
    lines = (run_dir / "events.jsonl").read_text().splitlines(keepends=True)
    nodes = [tmp_path / "node0", tmp_path / "node1"]
    for node, rank in zip(nodes, ("0", "1"), strict=True):
        node.mkdir()
        keep = [ln for ln in lines if f'"r":{rank}' in ln or '"r":' not in ln]
        (node / "events.jsonl").write_text("".join(keep))
    merged = load_runs(nodes).session
    assert sorted(merged.ranks) == [0, 1]
    assert merged.ranks[1].steps.count == 30
    # given as events files, the run directory is the first one's folder, as for one recording
    assert load_runs([n / "events.jsonl" for n in nodes]).run_dir == nodes[0]
    report = mpsprof_cli("report", *map(str, nodes), "--format", "md", env=ENV, timeout=60, stdin=None)
    assert report.returncode == 0, report.stderr
    assert "## Ranks (2)" in report.stdout and "straggler-rank" in report.stdout


@pytest.mark.serial
def test_distributed_summary_follows_the_schema(straggler_run):
    import jsonschema

    from mpsprofiler.report.json_report import __file__ as json_report_file

    _, run_dir = straggler_run
    schema = json.loads((Path(json_report_file).parent / "schema.json").read_text())
    summary = read_summary(run_dir)
    jsonschema.validate(summary, schema)
    assert [r["rank"] for r in summary["ranks"]] == [0, 1]
