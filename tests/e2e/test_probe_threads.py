"""What the probe runs beside the training thread (probe/channel.py, probe/sampler.py).

A real ``mpsprof run --headless``. On Linux a training process that started no thread of
its own gets none of the probe's either: the channel's wakes (every ``HEADLESS_INTERVAL``,
with the memory samples) run on the training thread, and the process still has one OS
thread at the end (a second one makes glibc's malloc lock at every call). The samples still
come: the first at the start, then at the wakes, and the final one at the exit. Forced
(``MPSPROF_CHANNEL_THREAD``), or once the script started a thread, the channel has its one
thread, which also takes the samples (a second thread woke twice a second beside it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from helpers import child_env, mpsprof_cli, read_events, read_summary
from mpsprofiler.probe.channel import HEADLESS_INTERVAL, THREADED_ENV

TRAIN = textwrap.dedent("""
    import sys, threading, time
    import torch

    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.ones(16, 8), torch.zeros(16, 1)
    start = time.perf_counter()
    steps = 0
    while time.perf_counter() - start < 1.6:
        if steps == 200 and "--start-a-thread" in sys.argv:
            threading.Thread(target=time.sleep, args=(0.01,)).start()  # ended long before the exit
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        steps += 1
    names = sorted(t.name for t in threading.enumerate() if t is not threading.main_thread())
    print("THREADS", ",".join(names))
    with open("/proc/self/status") as fh:
        print("OS_THREADS", [line.split()[1] for line in fh if line.startswith("Threads:")][0])
    print("STEPS", steps)
    from mpsprofiler.probe.probe import active
    print("INTERVAL", active().channel.interval)
""")

CASES = {
    "single-threaded": ([], {THREADED_ENV: "0"}, "", "1"),
    "forced": ([], {THREADED_ENV: "1"}, "mpsprof-channel", "2"),
    "a thread started mid-run": (["--start-a-thread"], {THREADED_ENV: "0"}, "mpsprof-channel", "2"),
}


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inline wakes: Linux only")
@pytest.mark.parametrize("case", list(CASES))
def test_the_channel_has_a_thread_only_where_the_training_has_one(tmp_path: Path, case: str) -> None:
    args, env, thread, os_threads = CASES[case]
    script = tmp_path / "train_threads.py"
    script.write_text(TRAIN)
    run_dir = tmp_path / "run"
    proc = mpsprof_cli("run", "--headless", "-o", str(run_dir), str(script), *args, env=child_env(**env),
                       timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert f"THREADS {thread}".strip() in [line.strip() for line in lines], proc.stdout
    assert f"OS_THREADS {os_threads}" in lines, proc.stdout
    # headless: nobody shows the steps live, so the channel wakes every half second
    assert f"INTERVAL {HEADLESS_INTERVAL}" in lines, proc.stdout
    recorded = read_events(run_dir)
    mems = [e for e in recorded if e.get("k") == "mem"]
    ran = int(next(line for line in lines if line.startswith("STEPS")).split()[1])
    assert read_summary(run_dir)["steps"]["count"] == ran  # every step, inline or threaded
    # at the start, at least two wakes in the 1.6 s loop, and the end state
    assert len(mems) >= 4, [round(e["ts"], 2) for e in mems]
    assert all(e.get("cpu_main_s") is not None for e in mems)


EQUAL = textwrap.dedent("""
    import time
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = TensorDataset(torch.randn(1024, 32), torch.randn(1024, 1))
    for epoch in range(2):
        for x, y in DataLoader(data, batch_size=16, shuffle=True):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
        with torch.no_grad():  # an evaluation of ~1 s: no step boundary, the collector's wakes
            start = time.perf_counter()
            while time.perf_counter() - start < 1.0:
                model(torch.randn(256, 32)).sum()
    print("LOSS", round(loss.item(), 6))
""")


def _facts(run_dir: Path) -> dict[str, Any]:
    """What a run recorded, timing aside: the steps (indices, mode), the model, the loss
    check, the exit, the kinds of events, and the findings' rules."""
    recorded = read_events(run_dir)
    untimed = {"ts", "dur", "end", "wait", "wait_cpu", "wait_runq", "pre", "bwd", "alloc", "idle"}
    steps = [{k: v for k, v in e.items() if k not in untimed} for e in recorded if e.get("k") == "steps"]
    facts: dict[str, Any] = {
        "i": [i for e in steps for i in e.get("i", [])],
        "modes": {e.get("mode") for e in steps},
        "kinds": {e["k"] for e in recorded} - {"others"},  # (the launcher's, when the machine is busy)
        "count": read_summary(run_dir)["steps"]["count"],
    }
    for kind in ("model", "exit"):
        facts[kind] = [{k: v for k, v in e.items() if k not in ("ts", "duration")} for e in recorded if e.get("k") == kind]
    facts["losses"] = [e.get("losses", e.get("last")) for e in recorded if e.get("k") == "health"]
    return facts


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inline wakes: Linux only")
def test_the_inline_channel_records_what_the_threaded_one_does(tmp_path: Path) -> None:
    """The same training, inline and forced threaded: the same steps, model, loss check,
    exit and kinds of events (the timings differ, and other programs' load decides some
    findings: benchmarks/RESULTS.md, session 57 part A, compares those of two runs)."""
    script = tmp_path / "train_equal.py"
    script.write_text(EQUAL)
    facts = []
    for n, env in enumerate(({THREADED_ENV: "0"}, {THREADED_ENV: "1"})):
        run_dir = tmp_path / f"run{n}"
        proc = mpsprof_cli("run", "--headless", "-o", str(run_dir), str(script), env=child_env(**env), timeout=180)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert [line for line in proc.stdout.splitlines() if line.startswith("LOSS")], proc.stdout
        facts.append(_facts(run_dir))
    inline, threaded = facts
    assert inline["count"] == 128 and inline["i"] == list(range(128))
    assert inline == threaded


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/schedstat"), reason="Linux /proc")
def test_the_benchmark_of_what_runs_beside_the_training_reads_every_thread() -> None:
    """benchmarks/beside_cpu.py, one short round (the figures themselves are in RESULTS.md):
    the launcher's threads and the training process's two (the channel's thread is the
    default, probe/channel.py ``threaded_because``), no sampler thread."""
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "beside_cpu.py"
    out = subprocess.run([sys.executable, str(script), "--repeats", "1", "--settle", "4", "--window", "1",
                          "--steps", "30000"], capture_output=True, text=True, timeout=300,
                         env={**child_env(), "OMP_NUM_THREADS": "1"}, check=True).stdout
    rows = {tuple(line.split()[:3]) for line in out.splitlines() if line.startswith("this")}
    assert {("this", "child", "training"), ("this", "child", "channel"), ("this", "parent", "event"),
            ("this", "all", "beside")} <= rows, out
    assert ("this", "child", "sampler") not in rows, out
