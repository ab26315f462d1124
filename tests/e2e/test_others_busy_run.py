"""A real run beside a busy program: the launcher's listing (launcher/others.py, read from
``/proc`` on Linux) names the other program in the ``others`` event and never the
training's own processes (its DataLoader worker burns CPU too)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import child_env, mpsprof_cli, read_events

TRAIN = textwrap.dedent("""
    import time
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Busy(Dataset):
        def __len__(self):
            return 10_000

        def __getitem__(self, i):
            end = time.perf_counter() + 0.002  # the worker computes: CPU of the training's tree
            while time.perf_counter() < end:
                pass
            return torch.ones(4), torch.zeros(1)

    if __name__ == "__main__":
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        start = time.perf_counter()
        for x, y in DataLoader(Busy(), batch_size=8, num_workers=1):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            if time.perf_counter() - start > 6.0:
                break
""")

SPIN = "import time\nend = time.time() + 60\nwhile time.time() < end:\n    pass\n"


@pytest.mark.slow
def test_a_busy_other_program_is_named_and_the_trainings_processes_never(tmp_path: Path) -> None:
    (tmp_path / "train_busy.py").write_text(TRAIN)
    (tmp_path / "spin_other.py").write_text(SPIN)
    spinner = subprocess.Popen([sys.executable, str(tmp_path / "spin_other.py")])
    try:
        run_dir = tmp_path / "run"
        proc = mpsprof_cli("run", "--headless", "-o", str(run_dir), str(tmp_path / "train_busy.py"),
                           env=child_env(), timeout=120)
    finally:
        spinner.kill()
        spinner.wait()
    assert proc.returncode == 0, proc.stderr[-3000:]
    readings = [e for e in read_events(run_dir) if e.get("k") == "others"]
    assert readings, "no others event"
    names = {t["name"] for e in readings for t in e.get("top", [])}
    assert not any("train_busy" in n for n in names), names  # the training and its worker: never others
    # (the spinner is in the top 3 unless other engineers' programs outdo it: checked below, in full)


@pytest.mark.slow
def test_the_listing_holds_a_busy_program_by_name_and_leaves_the_tree_out(tmp_path: Path) -> None:
    """The sampler's own thread over a real tree (a parent and its busy child, as a training
    and its worker) beside a busy program: every process's figure is kept (not only the top
    3, which a loaded machine's other programs may fill), the spinner's named and growing."""
    import time

    from mpsprofiler.launcher.others import OtherPrograms

    (tmp_path / "spin_other.py").write_text(SPIN)
    tree_code = ("import subprocess, sys, time; c = subprocess.Popen([sys.executable, '-c', "
                 "'import time\\nend = time.time() + 60\\nwhile time.time() < end: pass']); time.sleep(60)")
    tree = subprocess.Popen([sys.executable, "-c", tree_code])
    spinner = subprocess.Popen([sys.executable, str(tmp_path / "spin_other.py")])
    sampler = OtherPrograms(interval=0.2)
    try:
        time.sleep(0.3)
        sampler.start(tree.pid)
        time.sleep(2.0)
    finally:
        sampler.stop()
        import psutil

        kids = [c.pid for c in psutil.Process(tree.pid).children(recursive=True)]
        for p in (spinner, tree):
            p.kill()
            p.wait()
        for pid in kids:
            try:
                psutil.Process(pid).kill()
            except psutil.Error:
                pass
    assert kids  # the tree had its busy child while listed
    listed = {pid: (cpu, name) for (pid, _), (cpu, name) in sampler._last.items()}
    assert tree.pid not in listed and not set(kids) & set(listed), kids
    cpu, name = listed[spinner.pid]
    assert name == f"{Path(sys.executable).name} spin_other.py" and cpu > 0.0
