"""Never harm, round three (issue 33), the probe's side: mpsprof holds nothing of the
script's alive, calls no ``__len__`` python would not call, gives the script python's
``sys.path`` and frame stack, and counts warnings exactly.

Each test runs a tiny script with plain ``python`` and through the real CLI.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import child_env, read_events, run_mpsprof, run_python
from mpsprofiler.session.recording import load_run


def _write(folder: Path, name: str, source: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


def _last_json(stdout: bytes) -> dict:
    return json.loads(stdout.decode().strip().splitlines()[-1])


# -- 1. no DataLoader (nor its persistent workers) kept alive -------------------------
LOADERS = """
import gc, json, psutil, torch, weakref
from torch.utils.data import DataLoader, TensorDataset

me = psutil.Process()
counts, kept = [], []
for epoch in range(5):
    data = TensorDataset(torch.zeros(8, 1_000_000))  # 32 MB a loader
    loader = DataLoader(data, batch_size=2, num_workers=1, persistent_workers=True)
    for (batch,) in loader:
        batch.sum()
    kept.append(weakref.ref(data))
    del data, loader, batch
    gc.collect()
    alive = [c for c in me.children() if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    counts.append(len(alive))
print(json.dumps({"children": counts, "datasets_alive": sum(r() is not None for r in kept)}))
"""


@pytest.mark.slow
def test_loaders_made_per_epoch_are_not_kept_alive(tmp_path: Path) -> None:
    """Today the probe keeps every loader: 1, 2, 3, 4, 5 live workers and all five 32 MB
    datasets (RSS itself is no measure: plain python's grows too, by the allocator's whim)."""
    script = _write(tmp_path, "loaders.py", LOADERS)
    plain = run_python([str(script)])
    profiled = run_mpsprof([str(script)], tmp_path / "run")
    assert plain.returncode == 0 and profiled.returncode == 0, profiled.stderr[-2000:]
    ours, theirs = _last_json(profiled.stdout), _last_json(plain.stdout)
    assert theirs == {"children": [0] * 5, "datasets_alive": 0}, theirs  # python frees them all
    assert ours == theirs
    loaders = [e for e in read_events(tmp_path / "run") if e.get("k") == "dataloader"]
    assert [e["id"] for e in loaders if "fetches" not in e] == [1, 2, 3, 4, 5]  # each new loader is a new one
    assert all(e["len"] == 4 for e in loaders)  # torch's own sampler: the length is read
    # each one's sums are sent after it is gone (at exit, from a record that holds no loader):
    # a pass of 4 batches, the first left out (it waits for the workers to start)
    assert {e["id"]: e["fetches"] for e in loaders if "fetches" in e} == {i: 3 for i in range(1, 6)}


# -- 2. no __len__ of an IterableDataset called ---------------------------------------
ITERABLE = """
import sys, torch
from torch.utils.data import DataLoader, IterableDataset

LOG = sys.argv[1]

class Stream(IterableDataset):
    def __iter__(self):
        return iter(torch.arange(12.0).view(-1, 1))

    def __len__(self):
        with open(LOG, "a") as fh:
            fh.write("len called\\n")
        return 12

class Sampler(torch.utils.data.Sampler):
    def __init__(self, n):
        self.n = n
    def __iter__(self):
        return iter(range(self.n))
    def __len__(self):
        with open(LOG, "a") as fh:
            fh.write("sampler len called\\n")
        return self.n

w = torch.nn.Linear(1, 1)
opt = torch.optim.SGD(w.parameters(), lr=0.1)
for loader in (DataLoader(Stream(), batch_size=4),
               DataLoader(torch.zeros(8, 1), batch_size=4, sampler=Sampler(8))):
    for batch in loader:
        w(batch).sum().backward()
        opt.step()
        opt.zero_grad()
print("done")
"""


@pytest.mark.slow
def test_no_user_len_called(tmp_path: Path) -> None:
    """Today the probe calls len(loader): the dataset's and the sampler's __len__ run."""
    script = _write(tmp_path, "stream.py", ITERABLE)
    plain_log, our_log = tmp_path / "plain.log", tmp_path / "ours.log"
    plain = run_python([str(script), str(plain_log)])
    profiled = run_mpsprof([str(script), str(our_log)], tmp_path / "run")
    assert plain.returncode == 0 and profiled.returncode == 0, profiled.stderr[-2000:]
    assert not plain_log.exists()
    assert not our_log.exists(), our_log.read_text()
    # a loader's record is sent again with its fetch times (probe/loader_sites.py): one per construction number
    records = [e for e in read_events(tmp_path / "run") if e.get("k") == "dataloader"]
    loaders = {e["created"]: e for e in records}
    assert sorted(loaders) == [1, 2] and all(e.get("len") is None for e in records), records


# -- 5. warning counts exact, and the messages past the cap said -----------------------
WARNINGS = """
import warnings
warnings.simplefilter("always")
for i in range(150):
    warnings.warn("one hundred and fifty", UserWarning)
for i in range(12_345):
    warnings.warn("twelve thousand", RuntimeWarning)
for i in range(230):  # 230 distinct: 202 kept with the two above, 28 past the cap
    warnings.warn(f"distinct {i}", UserWarning)
warnings.warn("distinct 0", UserWarning)
"""


def test_warning_counts_are_exact_and_the_cap_is_said(tmp_path: Path) -> None:
    """Today: 'Count 100' for 150, 10000 for 12,345, and 32 messages dropped unsaid."""
    script = _write(tmp_path, "warn.py", WARNINGS)
    profiled = run_mpsprof([str(script)], tmp_path / "run")
    assert profiled.returncode == 0, profiled.stderr[-2000:]
    session = load_run(tmp_path / "run").session
    counts = {message: w.count for (_, message), w in session.warnings.items()}
    assert counts["one hundred and fifty"] == 150
    assert counts["twelve thousand"] == 12_345
    assert counts["distinct 0"] == 2
    assert len(counts) == 200
    assert session.warnings_dropped.text() == "32 more distinct messages (shown 32 times) not kept"
    report = subprocess.run([sys.executable, "-m", "mpsprofiler", "report", str(tmp_path / "run"), "--format", "md"],
                            capture_output=True, text=True, env=child_env(), timeout=60)
    assert "32 more distinct messages (shown 32 times) not kept" in report.stdout, report.stdout[-3000:]
    assert "| 12345 |" in report.stdout and "| 150 |" in report.stdout


# -- 3. sys.path as python's, the user's same-named modules neither break nor leak ------
SYS_PATH = """
import sys, json
print(repr(sys.path))
print(getattr(json, "MINE", None))
"""


@pytest.mark.parametrize("where", ["cwd", "script_dir"])
def test_sys_path_and_shadowing_modules_as_under_python(tmp_path: Path, where: str) -> None:
    """Today a cwd token.py kills mpsprof's boot (rc 1) and a cwd json.py becomes the
    script's json; a json.py beside the script is the script's under python only."""
    root = tmp_path / "root"
    script = _write(root, "scripts/train.py", SYS_PATH)
    folder = root if where == "cwd" else script.parent
    _write(folder, "token.py", "X = 1\n")
    _write(folder, "json.py", "MINE = 1\nimport json as _j\n")
    plain = run_python(["scripts/train.py"], cwd=root)
    # the parent's own `python -m` would see the cwd: -P keeps it off the parent only
    profiled = _run_cli(["-P", "-m", "mpsprofiler", "run", "--headless", "-o", str(tmp_path / "run"),
                         "scripts/train.py"], root)
    assert plain.returncode == 0 and profiled.returncode == 0, profiled.stderr[-2000:]
    assert profiled.stdout == plain.stdout


def test_pythonsafepath_respected(tmp_path: Path) -> None:
    """PYTHONSAFEPATH=1: no script directory on sys.path, as python does."""
    script = _write(tmp_path, "s.py", SYS_PATH)
    env = child_env(PYTHONSAFEPATH="1")
    plain = run_python([str(script)], env=env)
    profiled = run_mpsprof([str(script)], tmp_path / "run", env=env)
    assert plain.returncode == 0 and profiled.returncode == 0, profiled.stderr[-2000:]
    assert repr(str(tmp_path)) not in plain.stdout.decode()
    assert profiled.stdout == plain.stdout


def _run_cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, env=child_env(),
                          stdin=subprocess.DEVNULL, timeout=120)
