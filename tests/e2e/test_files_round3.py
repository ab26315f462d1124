"""Never harm, round three (issue 33): the files mpsprof writes and reads.

Writers: ``report -o``, ``compare -o`` and ``run --report`` write *through* whatever node
the user named (a FIFO, a device, ``/dev/stdout``) and replace only regular files; a
failing standard output (``/dev/full``, a closed pipe) is one clean line and a non-zero
exit. Readers: every file goes through one guarded opener (regular files only, a size
bound, no symlinks inside a run directory). Rule files: a regex that would compile to an
enormous program is refused before compiling; a ``--rules`` symlink loop is reported and
the builtin findings stay. All on real files, FIFOs and symlinks, through the real CLI.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.helpers import child_env, mpsprof_cli

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "recordings" / "slow_dataloader"


@pytest.fixture()
def run_dir(tmp_path: Path) -> Path:
    """A copy of a real recording (the fixture stays untouched)."""
    target = tmp_path / "run"
    shutil.copytree(FIXTURE, target)
    return target


def _drain(fifo: Path, into: list[bytes]) -> threading.Thread:
    """A reader on ``fifo`` (as ``cat fifo`` would be), in a thread."""
    def read() -> None:
        with open(fifo, "rb") as fh:
            into.append(fh.read())
    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


# -- writers ---------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["report", "compare"])
def test_output_to_a_fifo_reaches_its_reader(run_dir: Path, tmp_path: Path, command: str) -> None:
    """Before: the FIFO was replaced by a regular file (a temp file renamed over it) and
    its reader got 0 bytes (and waited forever)."""
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = _drain(fifo, got)
    args = ["report", str(run_dir), "--format", "md"] if command == "report" else \
        ["compare", str(run_dir), str(run_dir), "--format", "text"]
    proc = mpsprof_cli(*args, "-o", str(fifo), timeout=60)
    reader.join(10)
    assert proc.returncode == 0, proc.stderr
    assert fifo.is_fifo(), "the FIFO was replaced"
    assert got and (b"mpsprof" in got[0]) and len(got[0]) > 200, got


def test_output_through_a_symlink_to_dev_stdout(run_dir: Path, tmp_path: Path) -> None:
    """``-o link`` where link -> /dev/stdout: the report reaches stdout, the link stays."""
    link = tmp_path / "to-stdout.md"
    link.symlink_to("/dev/stdout")
    proc = mpsprof_cli("report", str(run_dir), "--format", "md", "-o", str(link), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert link.is_symlink() and os.readlink(link) == "/dev/stdout"
    assert proc.stdout.startswith("# ") and "slow" in proc.stdout.lower(), proc.stdout[:300]


def test_output_to_a_device_keeps_the_device(run_dir: Path, tmp_path: Path) -> None:
    """``-o /dev/null``: written through. As root the old rename replaced the system's
    /dev/null with a regular file, so the test never points the old code at the real one:
    as root it uses a private null device node of its own (mknod), else /dev/null (which
    a user's rename cannot replace)."""
    device = Path(os.devnull)
    if os.geteuid() == 0:
        device = tmp_path / "null"
        os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    proc = mpsprof_cli("report", str(run_dir), "--format", "md", "-o", str(device), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert device.is_char_device()


def test_regular_output_file_is_still_replaced_atomically(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    out.write_text("old")
    inode = out.stat().st_ino
    proc = mpsprof_cli("report", str(run_dir), "--format", "md", "-o", str(out), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert out.read_text().startswith("# ") and out.stat().st_ino != inode  # a new file, renamed over it
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_report_to_dev_full_is_one_clean_line(run_dir: Path) -> None:
    """Before: an OSError traceback."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "mpsprofiler", "report", str(run_dir), "--format", "md"],
                              stdout=full, stderr=subprocess.PIPE, text=True, env=child_env(), timeout=60)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "standard output" in lines[0] and "No space left" in lines[0], proc.stderr


def test_report_into_a_closed_pipe_is_one_clean_line(run_dir: Path) -> None:
    """``mpsprof report X | head -1`` once head has gone: EPIPE, no traceback."""
    proc = subprocess.Popen([sys.executable, "-m", "mpsprofiler", "report", str(run_dir), "--format", "html"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env())
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before mpsprof writes
    stderr = proc.stderr.read().decode()
    assert proc.wait(60) != 0
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1 and "Broken pipe" in stderr, stderr


# -- readers ---------------------------------------------------------------------------
def test_fifo_as_experiments_json_does_not_hang_report(run_dir: Path) -> None:
    """Before: ``report`` opened the FIFO and waited for a writer forever."""
    os.mkfifo(run_dir / "experiments.json")
    proc = mpsprof_cli("report", str(run_dir), "--format", "md", timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert "# " in proc.stdout


def test_dev_zero_as_experiments_json_is_not_read(run_dir: Path) -> None:
    """A symlink to /dev/zero: before, read until MemoryError (bounded here by RLIMIT_AS so the
    test fails instead of eating the machine)."""
    (run_dir / "experiments.json").symlink_to("/dev/zero")

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    proc = subprocess.run([sys.executable, "-m", "mpsprofiler", "report", str(run_dir), "--format", "md"],
                          capture_output=True, text=True, env=child_env(), timeout=60, preexec_fn=limit)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "MemoryError" not in proc.stderr


def test_guarded_reader_refuses_fifos_devices_symlinks_and_huge_files(tmp_path: Path) -> None:
    from mpsprofiler.rundir import read_regular

    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    big = tmp_path / "big"
    big.write_bytes(b"x" * 2048)
    link = tmp_path / "link"
    link.symlink_to(big)
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    for path, kwargs in ((fifo, {}), (Path("/dev/zero"), {}), (big, {"limit": 1024}), (link, {"follow": False}),
                         (loop, {}), (tmp_path, {})):
        with pytest.raises(OSError):
            read_regular(path, **kwargs)  # type: ignore[arg-type]
    assert read_regular(link) == b"x" * 2048  # a user's own link is followed where allowed


def test_experiments_symlink_in_the_run_dir_is_refused(run_dir: Path, tmp_path: Path) -> None:
    """``RUN/experiments -> elsewhere``: the runs of ``try`` must not land outside the run."""
    from mpsprofiler.experiment.store import ExperimentDirError, experiment_dir

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run_dir / "experiments").symlink_to(elsewhere)
    with pytest.raises(ExperimentDirError, match="symbolic link"):
        experiment_dir(run_dir, "num_workers=2")
    assert list(elsewhere.iterdir()) == []


def test_try_refuses_a_planted_experiments_symlink(run_dir: Path, tmp_path: Path) -> None:
    """The real CLI: ``try RUN --set ...`` stops with a usage error, nothing written elsewhere."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run_dir / "experiments").symlink_to(elsewhere)
    proc = mpsprof_cli("try", str(run_dir), "--set", "dataloader.num_workers=0", timeout=60)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "symbolic link" in proc.stderr and "Traceback" not in proc.stderr
    assert list(elsewhere.iterdir()) == []


# -- rule files ------------------------------------------------------------------------
BOMB = "(?:(?:a{1000}){1000}){1000}"


def test_regex_bomb_is_refused_before_compiling(tmp_path: Path) -> None:
    """Before: 23 GB RSS and killed. Now a rule error in milliseconds (RLIMIT_AS 2 GiB, so
    the old behaviour fails the test instead of the machine)."""
    rules = tmp_path / "bomb.yaml"
    rules.write_text("rules:\n  - id: bomb\n    title: t\n    severity: info\n"
                     f"    when: \"matches('{BOMB}', crash_message)\"\n    evidence: e\n    fix: f\n")

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    proc = subprocess.run([sys.executable, "-m", "mpsprofiler", "rules", "check", str(rules)], capture_output=True,
                          text=True, env=child_env(), timeout=60, preexec_fn=limit)
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr[-2000:])
    assert "expands to 1,000,000,000 atoms" in proc.stdout, proc.stdout


@pytest.mark.parametrize("pattern,ok", [
    (r"out of memory|MPS backend out of memory", True), (r"\d{1,3}(?:\.\d+)?", True), (r"[a-z]{100}", True),
    (r"(?:a{100}){100}", True), (r"(?:a{100}){101}", False), (r"(?i)(?P<x>ab{50}){300}", False),
    (r"\p{L}{9999}x{3}", False), (r"\p{L}{9990}", True), (r"[{]{99999}", False),
])
def test_regex_size_bound(pattern: str, ok: bool) -> None:
    from mpsprofiler.diagnosis.conditions import ConditionError, compile_condition

    if ok:
        compile_condition(f"matches({pattern!r}, crash_message)")
    else:
        with pytest.raises(ConditionError, match="expands to"):
            compile_condition(f"matches({pattern!r}, crash_message)")


def test_rules_symlink_loop_is_reported_and_builtins_kept(run_dir: Path, tmp_path: Path) -> None:
    """Before: a RuntimeError traceback in ``rules check``; in ``report`` 'diagnosis failed'
    and every builtin finding dropped."""
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    check = mpsprof_cli("rules", "check", str(loop), timeout=60)
    assert check.returncode == 1 and "Traceback" not in check.stderr, check.stderr
    assert "symbolic link loop" in check.stdout, check.stdout
    plain = mpsprof_cli("report", str(run_dir), "--format", "json", timeout=60)
    looped = mpsprof_cli("report", str(run_dir), "--format", "json", "--rules", str(loop), timeout=60)
    assert plain.returncode == looped.returncode == 0, looped.stderr
    before, after = json.loads(plain.stdout), json.loads(looped.stdout)
    assert before["findings"], "the fixture has builtin findings"
    assert [f["rule"] for f in after["findings"]] == [f["rule"] for f in before["findings"]]
    assert not any("diagnosis failed" in e for e in after["rule_errors"])
    assert any("symbolic link loop" in e for e in after["rule_errors"]), after["rule_errors"]
    assert "rule file problem" in looped.stderr and "symbolic link loop" in looped.stderr


def test_rules_fifo_is_refused_not_read(tmp_path: Path) -> None:
    fifo = tmp_path / "rules.yaml"
    os.mkfifo(fifo)
    proc = mpsprof_cli("rules", "check", str(fifo), timeout=30)
    assert proc.returncode == 1 and "not a regular file" in proc.stdout, proc.stdout


def test_run_report_to_a_fifo_reaches_its_reader(tmp_path: Path) -> None:
    """``run --report FIFO``: the report goes through the FIFO (before: replaced, 0 bytes read)."""
    script = tmp_path / "tiny.py"
    script.write_text("print('hello')\n")
    fifo = tmp_path / "report.md"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = _drain(fifo, got)
    proc = mpsprof_cli("run", "--headless", "-o", str(tmp_path / "run"), "--report", str(fifo), str(script),
                       timeout=120)
    reader.join(10)
    assert proc.returncode == 0, proc.stderr
    assert fifo.is_fifo() and got and got[0].startswith(b"# mpsprof"), got
