"""What the probe runs beside the training thread (probe/channel.py, probe/sampler.py).

A real ``mpsprof run --headless``: the training process gets one thread of the probe's,
the channel's, waking every ``HEADLESS_INTERVAL``, which also takes the memory samples (a second thread woke twice a second
beside it, each wake taking the GIL from the training), and the samples still come: the
first at the start, then at the channel's wakes, and the final one at the exit.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import child_env, mpsprof_cli, read_events
from mpsprofiler.probe.channel import HEADLESS_INTERVAL

TRAIN = textwrap.dedent("""
    import threading, time
    import torch

    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.ones(16, 8), torch.zeros(16, 1)
    start = time.perf_counter()
    while time.perf_counter() - start < 1.6:
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    names = sorted(t.name for t in threading.enumerate() if t is not threading.main_thread())
    print("THREADS", ",".join(names))
    from mpsprofiler.probe.probe import active
    print("INTERVAL", active().channel.interval)
""")


@pytest.mark.slow
def test_one_probe_thread_sends_the_events_and_takes_the_memory_samples(tmp_path: Path) -> None:
    script = tmp_path / "train_threads.py"
    script.write_text(TRAIN)
    run_dir = tmp_path / "run"
    proc = mpsprof_cli("run", "--headless", "-o", str(run_dir), str(script), env=child_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    threads = [line for line in proc.stdout.splitlines() if line.startswith("THREADS")]
    assert threads == ["THREADS mpsprof-channel"], proc.stdout
    # headless: nobody shows the steps live, so the channel wakes every half second
    assert f"INTERVAL {HEADLESS_INTERVAL}" in proc.stdout.splitlines(), proc.stdout
    recorded = read_events(run_dir)
    mems = [e for e in recorded if e.get("k") == "mem"]
    steps = [e for e in recorded if e.get("k") == "steps"]
    assert steps, "no step event"
    # at the start, at least two wakes in the 1.6 s loop, and the end state
    assert len(mems) >= 4, [round(e["ts"], 2) for e in mems]
    assert mems[-1]["ts"] > min(e["ts"] for e in steps)  # the exit's
    assert all(e.get("cpu_main_s") is not None for e in mems)


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/schedstat"), reason="Linux /proc")
def test_the_benchmark_of_what_runs_beside_the_training_reads_every_thread() -> None:
    """benchmarks/beside_cpu.py, one short round (the figures themselves are in RESULTS.md):
    the launcher's three threads and the training process's two, no sampler thread."""
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "beside_cpu.py"
    out = subprocess.run([sys.executable, str(script), "--repeats", "1", "--settle", "4", "--window", "1",
                          "--steps", "30000"], capture_output=True, text=True, timeout=300,
                         env={**child_env(), "OMP_NUM_THREADS": "1"}, check=True).stdout
    rows = {tuple(line.split()[:3]) for line in out.splitlines() if line.startswith("this")}
    assert {("this", "child", "training"), ("this", "child", "channel"), ("this", "parent", "event"),
            ("this", "all", "beside")} <= rows, out
    assert ("this", "child", "sampler") not in rows, out
