"""A script's own non-zero exit is not called a crash (session/exit_words.py).

argparse's usage error (status 2) is what a newcomer meets first when ``mpsprof run
train.py`` leaves out an argument; an early stop by ``sys.exit(3)`` is a training loop's.
Neither has a traceback. An uncaught exception (status 1, its traceback printed) is a crash.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import mpsprof_cli

USAGE_ERROR = '''import argparse
parser = argparse.ArgumentParser()
parser.add_argument("--data", required=True)
parser.parse_args()
'''
RAISES = '''def load(path):
    raise FileNotFoundError(path)
load("missing.csv")
'''


def _run(tmp_path: Path, name: str, code: str) -> tuple[str, str]:
    script = tmp_path / f"{name}.py"
    script.write_text(code)
    proc = mpsprof_cli("run", "--headless", "-o", str(tmp_path / name), str(script), cwd=tmp_path)
    report = mpsprof_cli("report", str(tmp_path / name), "--format", "md")
    return proc.stderr, report.stdout.splitlines()[0]


def test_sys_exit_is_an_exit_with_its_status_and_an_exception_is_a_crash(tmp_path: Path) -> None:
    stderr, title = _run(tmp_path, "usage", USAGE_ERROR)
    assert "the following arguments are required: --data" in stderr  # argparse's own words, as under python
    assert "usage.py: exited with status 2 (no exception) after" in stderr, stderr
    assert "crashed" not in stderr
    assert title.endswith("usage.py exited with status 2 (no exception)"), title
    stderr, title = _run(tmp_path, "raises", RAISES)
    assert "FileNotFoundError: missing.csv" in stderr
    assert "raises.py: crashed (exit status 1) after" in stderr, stderr
    assert title.endswith("raises.py crashed (exit status 1)"), title


RAISES_AT_STEP_5 = '''import torch
model = torch.nn.Linear(10, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(20):
    loss = model(torch.randn(8, 10)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step == 5:
        raise ValueError("bad batch at step 5")
'''


def test_a_crash_names_the_steps_that_finished_as_every_other_text_numbers_them(tmp_path: Path) -> None:
    """A loop that raises "bad batch at step 5" in its 0-based step 5 (after that step's
    optimizer step) was "Crashed at step 6": the count of finished steps read as a step
    number, where every other text numbers steps from 0 (step 0 is the warm-up)."""
    stderr, _ = _run(tmp_path, "step5", RAISES_AT_STEP_5)
    assert "Crashed after 6 steps (0 to 5): ValueError: bad batch at step 5" in stderr, stderr
    assert "Crashed at step" not in stderr


@pytest.mark.slow
def test_a_dataloader_workers_raise_is_named_at_its_line_not_the_loops(tmp_path: Path) -> None:
    """torch re-raises a worker's exception in the training process, whose traceback ends at
    ``for x, y in loader:``; the line to fix is in the worker's copied traceback
    (``__getitem__``'s raise): the title, the fix and the report's Crash section name it."""
    import subprocess
    import sys

    from helpers import REPO, child_env, read_summary

    script = REPO / "tests" / "scripts_loader" / "worker_raises.py"
    bare = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=child_env(), timeout=120)
    run = tmp_path / "run"
    proc = mpsprof_cli("run", "--headless", "-o", str(run), str(script))
    assert proc.returncode == bare.returncode == 1, proc.stderr[-2000:]
    lines = script.read_text().splitlines()
    raise_line = next(i for i, t in enumerate(lines, 1) if "raise ValueError" in t)
    (crash,) = [f for f in read_summary(run)["findings"] if f["rule"] == "crash"]
    assert crash["title"].endswith(f"worker_raises.py:{raise_line}"), crash["title"]
    # the worker's own error, not only "Caught ValueError in DataLoader worker process 0."
    assert "ValueError: corrupt record 77 (in DataLoader worker process " in crash["title"], crash["title"]
    assert f"worker_raises.py:{raise_line}`" in crash["fix"], crash["fix"]
    report = mpsprof_cli("report", str(run), "--format", "md")
    assert f"worker_raises.py:{raise_line}` in `__getitem__`" in report.stdout, report.stdout[-3000:]


OS_EXIT = '''import os
import sys
import time

import torch

model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
time.sleep(3)  # loading: the run lasts long enough for "no steps seen" to be judged
for step in range(40):
    loss = model(torch.randn(16, 8)).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("trained", flush=True)
os._exit(int(sys.argv[1]))  # skips atexit: the probe's final flush never runs
'''


@pytest.mark.parametrize("code", [0, 3])
def test_os_exit_after_training_is_named_as_such_not_a_closed_channel(tmp_path: Path, code: int) -> None:
    """``os._exit(N)`` after training skips Python's shutdown, so the probe's buffered last
    events are never sent. The recording says that (with the status the script chose, passed
    through unchanged), never "the script closed mpsprof's event channel", and the steps
    whose events were lost are no "no training steps seen" finding."""
    from helpers import read_summary

    script = tmp_path / "os_exit.py"
    script.write_text(OS_EXIT)
    run = tmp_path / "run"
    proc = mpsprof_cli("run", "--headless", "-o", str(run), str(script), str(code), cwd=tmp_path)
    assert proc.returncode == code, proc.stderr[-2000:]
    assert "trained" in proc.stdout
    summary = read_summary(run)
    (problem,) = summary["recording"]["problems"]
    assert "event channel" not in problem, problem
    assert problem.startswith("the script ended without Python's normal shutdown "
                              f"(as os._exit({code}) does, which skips atexit functions): mpsprof's last events ("), problem
    steps = summary["steps"]["count"]
    # the highest step the recording shows (0-based; op samples may name one when no steps event came)
    lost = f"after step {steps - 1}, the last the recording shows" if steps else ""
    assert f"({lost}" in problem and ") were never sent" in problem, problem
    assert "no-step-signal" not in [f["rule"] for f in summary["findings"]]
    assert "no optimizer step, backward pass" not in proc.stderr
    assert f"recording   INCOMPLETE: {problem}" in proc.stderr
