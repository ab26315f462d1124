"""Wrapping conformance: a script under ``mpsprof run --headless`` behaves as under ``python``.

Every case runs the same script both ways and compares exit status, stdout and stderr
(the mpsprof summary block removed) byte for byte; see :mod:`helpers`.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from helpers import (
    SCRIPTS,
    Result,
    assert_same,
    child_env,
    compare,
    mpsprof_cmd,
    python_cmd,
    read_events,
    read_summary,
)

pytestmark = pytest.mark.slow  # every test starts real training processes under hostile conditions


EXIT_MODES = {
    "fall_off": 0,
    "0": 0,
    "1": 1,
    "2": 2,
    "message": 1,
    "os_exit": 3,
    "SIGTERM": -signal.SIGTERM,
    "SIGKILL": -signal.SIGKILL,
    "raise": 1,
    "keyboard": -signal.SIGINT,
}


@pytest.mark.parametrize("mode", EXIT_MODES)
def test_exit_status_output_and_traceback(tmp_path: Path, mode: str) -> None:
    plain, profiled = compare([str(SCRIPTS / "exits.py"), mode], tmp_path / "run")
    assert plain.returncode == EXIT_MODES[mode]
    assert "── mpsprof" in profiled.summary_text
    exit_event = [e for e in read_events(tmp_path / "run") if e["k"] == "exit"]
    assert exit_event and exit_event[0]["returncode"] == EXIT_MODES[mode]
    if mode == "raise":
        # the traceback is Python's own: it starts at the script, no frame of ours
        assert b"mpsprofiler" not in profiled.script_stderr
        assert b"runpy" not in profiled.script_stderr
        summary = read_summary(tmp_path / "run")
        assert summary["crash"]["type"] == "ValueError"


@pytest.mark.parametrize("form", ["absolute", "relative", "symlink"])
def test_script_sees_what_python_gives_it(tmp_path: Path, form: str) -> None:
    """argv, sys.path[0] (symlinks resolved), __file__, cwd, __main__ globals, stdin,
    a sibling import, no torch imported for it, no MPSPROF_* variables, subprocesses
    and the descriptors a shell-started grandchild inherits."""
    cwd = tmp_path
    if form == "absolute":
        script = str(SCRIPTS / "facts.py")
    elif form == "relative":
        script, cwd = "facts.py", SCRIPTS
    else:
        link = tmp_path / "linked.py"
        link.symlink_to(SCRIPTS / "facts.py")
        script = "linked.py"
    stdin = os.urandom(300_000)
    plain, profiled = compare([script, "first", "--flag", "a b"], tmp_path / "run", cwd=cwd, input=stdin)
    out = plain.stdout.decode()
    assert "torch loaded []" in out and "guarded block ran" in out and "import sibling ok" in out
    assert hashlib.sha256(stdin).hexdigest() in out


@pytest.mark.parametrize("extra", [[], ["--raise"]])
def test_module_form(tmp_path: Path, extra: list[str]) -> None:
    """``mpsprof run -m pkg.mod -- args`` is ``python -m pkg.mod args``, traceback included
    (Python shows its runpy frames for -m: so must we)."""
    plain, _ = compare(["-m", "pkg.mod", "-x", "--y", *extra], tmp_path / "run", cwd=SCRIPTS)
    if extra:
        assert plain.returncode == 1 and b"RuntimeError: from a module" in plain.stderr
    else:
        assert b"guarded block ran" in plain.stdout


def test_reads_stdin_line_by_line(tmp_path: Path) -> None:
    text = "".join(f"line {i} ünïcode\n" for i in range(5000)).encode()
    plain, _ = compare([str(SCRIPTS / "echo_stdin.py")], tmp_path / "run", input=text)
    assert plain.stdout.endswith(b"lines 5000\n")


def test_script_that_changes_cwd(tmp_path: Path) -> None:
    plain, _ = compare([str(SCRIPTS / "chdir.py")], tmp_path / "run", cwd=tmp_path)
    assert plain.stdout.startswith(b"moved True True sibling ok\nfile exists after chdir True")


def test_script_that_closes_inherited_descriptors(tmp_path: Path) -> None:
    """After os.closerange() the event channel's number may name the script's own file:
    the probe must notice and write nothing there."""
    plain, _ = compare([str(SCRIPTS / "closes_fds.py")], tmp_path / "run")
    assert plain.stdout == b"intact True\n"


@pytest.mark.slow
def test_torch_script_with_its_own_warnings_modes_hooks_and_threads(tmp_path: Path) -> None:
    plain, profiled = compare([str(SCRIPTS / "torch_features.py")], tmp_path / "run")
    assert plain.returncode == 0, plain.stderr
    assert b"my showwarning" in plain.stdout
    summary = read_summary(tmp_path / "run")
    assert summary["steps"]["count"] == 10
    evs = read_events(tmp_path / "run")
    assert {"model", "steps", "warning"} <= {e["k"] for e in evs}
    # torch's facts arrive once the script itself has imported torch
    envs = [e for e in evs if e["k"] == "env"]
    assert envs[0]["torch"] is None and envs[-1]["torch"] and envs[-1]["torch_threads"] == 1


@pytest.mark.slow
@pytest.mark.parametrize("context", ["spawn", "fork"])
def test_dataloader_workers(tmp_path: Path, context: str) -> None:
    plain, _ = compare([str(SCRIPTS / "loader.py"), context], tmp_path / "run")
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.startswith(b"batches 12 ")
    summary = read_summary(tmp_path / "run")
    assert summary["steps"]["count"] == 12
    assert summary["steps"]["mode"] == "optimizer"
    loader = summary["dataloaders"][0]
    assert loader["num_workers"] == 2 and loader["multiprocessing_context"] == context


@pytest.mark.slow
def test_100_mb_of_output_passes_through_untouched(tmp_path: Path) -> None:
    def run(cmd: list[str], name: str) -> tuple[float, str, int, bytes]:
        out = tmp_path / name
        started = time.monotonic()
        with open(out, "wb") as fh:
            proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                  env=child_env(), timeout=180)
        seconds = time.monotonic() - started
        digest = hashlib.sha256(out.read_bytes()).hexdigest()
        size = out.stat().st_size
        out.unlink()
        assert proc.returncode == 0, proc.stderr
        return seconds, digest, size, proc.stderr

    args = [str(SCRIPTS / "bigprint.py"), "100"]
    plain_s, plain_sha, plain_size, _ = run(python_cmd(args), "plain.out")
    prof_s, prof_sha, prof_size, prof_err = run(mpsprof_cmd(args, tmp_path / "run"), "prof.out")
    assert plain_size == prof_size == 100 * 1024 * 1024
    assert prof_sha == plain_sha
    assert prof_err.startswith(b"done\n")
    # the output does not go through mpsprof at all: only its start-up and summary add time
    assert prof_s < plain_s * 1.5 + 15, (plain_s, prof_s)


def _start(cmd: list[str]) -> subprocess.Popen[bytes]:
    # stdin is not a terminal: the child gets its own process group, the parent forwards
    # unbuffered: what readline() does not consume must be left for communicate()
    return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=child_env(), bufsize=0)


def _interrupt(cmd: list[str], sig: int) -> Result:
    started = time.monotonic()
    proc = _start(cmd)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line == b"ready\n", (line, proc.stderr.read() if proc.poll() is not None else b"")
    time.sleep(0.3)  # into the sleep() call
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    return Result(proc.returncode, line + out, err, time.monotonic() - started)


def test_ctrl_c_at_a_terminal(tmp_path: Path) -> None:
    """With a terminal on stdin the child shares mpsprof's process group and the terminal
    sends Ctrl-C to both: the script sees one KeyboardInterrupt, as under python, and
    mpsprof itself survives it to report the run (its exit status is the script's)."""
    import pty

    def at_terminal(cmd: list[str]) -> Result:
        leader, follower = pty.openpty()
        try:
            proc = subprocess.Popen(cmd, stdin=follower, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    env=child_env(), start_new_session=True, bufsize=0)
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line == b"ready\n"
            time.sleep(0.3)
            os.killpg(proc.pid, signal.SIGINT)  # what the terminal does on Ctrl-C
            out, err = proc.communicate(timeout=60)
        finally:
            os.close(leader)
            os.close(follower)
        return Result(proc.returncode, line + out, err, 0.0)

    args = [str(SCRIPTS / "sleeper.py"), "--twice"]
    plain = at_terminal(python_cmd(args))
    profiled = at_terminal(mpsprof_cmd(args, tmp_path / "run"))
    assert plain.returncode == 0 and plain.stdout.endswith(b"interrupted once\n")
    assert_same(plain, profiled)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_to_mpsprof_reaches_the_script(tmp_path: Path, sig: int) -> None:
    """Ctrl-C (SIGINT) or a scheduler's SIGTERM sent to mpsprof: the script sees it as
    under python (KeyboardInterrupt traceback), and mpsprof dies by the same signal."""
    args = [str(SCRIPTS / "sleeper.py")]
    plain = _interrupt(python_cmd(args), sig)
    profiled = _interrupt(mpsprof_cmd(args, tmp_path / "run"), sig)
    assert plain.returncode == -sig
    assert_same(plain, profiled)
    exit_event = [e for e in read_events(tmp_path / "run") if e["k"] == "exit"][0]
    assert exit_event["signal"] == sig and exit_event["stopped_by_user"] is False
