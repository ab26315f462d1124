"""``mpsprof run`` starts the script as ``python`` would: argv verbatim, inherited file
descriptors, signals and the terminal. Each test compares a plain run with a profiled one
through the real CLI (see tests/helpers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import SCRIPTS, compare

pytestmark = pytest.mark.slow  # every test starts real runs, plain and profiled


def test_everything_after_the_script_is_its_own_verbatim(tmp_path: Path) -> None:
    """``mpsprof run s.py -- --lr 1``: the ``--`` is the script's (argparse used to eat it);
    a ``--`` before the script, or after ``-m MODULE``, still ends mpsprof's options."""
    plain, _ = compare([str(SCRIPTS / "facts.py"), "--", "--lr", "1", "-o", "x"], tmp_path / "run")
    assert "argv ['" in plain.stdout.decode() and "'--', '--lr', '1', '-o', 'x']" in plain.stdout.decode()


def test_descriptors_the_shell_opened_reach_the_script(tmp_path: Path) -> None:
    """``mpsprof run s.py 3>file``: fd 3 is the script's, as under python (it was EBADF)."""
    import shlex
    import subprocess
    import sys

    from helpers import child_env, read_events

    def run(prefix: str, out: Path) -> subprocess.CompletedProcess[bytes]:
        cmd = f"{prefix} {shlex.quote(str(SCRIPTS / 'inherited_fd.py'))} 3>{shlex.quote(str(out))}"
        return subprocess.run(["bash", "-c", cmd], capture_output=True, env=child_env(), timeout=120,
                              stdin=subprocess.DEVNULL)

    py = shlex.quote(sys.executable)
    plain = run(py, tmp_path / "plain.txt")
    profiled = run(f"{py} -m mpsprofiler run --headless -o {shlex.quote(str(tmp_path / 'run'))}", tmp_path / "profiled.txt")
    assert plain.returncode == 0 and profiled.returncode == 0, profiled.stderr[-2000:]
    assert profiled.stdout == plain.stdout == b"wrote to fd 3\n"
    assert (tmp_path / "profiled.txt").read_bytes() == (tmp_path / "plain.txt").read_bytes() == b"written to fd 3\n"
    assert [e["k"] for e in read_events(tmp_path / "run")][-1] == "exit"  # the channel was not disturbed


# -- at a terminal (tmux) ------------------------------------------------------------------
@pytest.fixture
def term(tmp_path: Path):
    from tmux import Tmux

    t = Tmux(tmp_path)
    yield t
    t.close()


@pytest.mark.slow
def test_kill_int_to_mpsprof_at_a_terminal_reaches_the_script_once(term, tmp_path: Path) -> None:
    """``kill -INT <mpsprof pid>`` (headless, at a terminal) is one KeyboardInterrupt in the
    script, as ``kill -INT <python pid>`` is (it never arrived: the script shared
    mpsprof's group and mpsprof left SIGINT to the terminal)."""
    import os
    import signal

    from tmux import mpsprof_line, pid_of

    run_dir = tmp_path / "run"
    term.send(mpsprof_line("run", "--headless", "-o", str(run_dir), str(SCRIPTS / "tty_job.py")), enter=True)
    screen = term.wait_for("ready ")
    assert "ready foreground" in screen  # the terminal's job is the script, as under a shell
    os.kill(pid_of(f"mpsprofiler run --headless -o {run_dir}"), signal.SIGINT)
    code, screen = term.wait_for_exit()
    assert "interrupted once" in screen and "interrupted twice" not in screen and code == 0


@pytest.mark.slow
def test_piped_stdin_getpass_ctrl_z_and_ctrl_c_at_a_terminal(term, tmp_path: Path) -> None:
    """stdin a pipe, the terminal still there: ``getpass`` reads the terminal (EIO before:
    the script ran in a background group), Ctrl-Z stops the script and mpsprof together
    (the shell says Stopped; training went on before), ``fg`` continues both, Ctrl-C is
    one KeyboardInterrupt."""
    from tmux import mpsprof_line, stat_of

    # no "; echo EXIT" here: the shell runs it as soon as the job stops
    line = mpsprof_line("run", "--headless", "-o", str(tmp_path / "run"), str(SCRIPTS / "tty_job.py"), "--getpass", echo=False)
    term.send("echo piped | " + line, enter=True)
    screen = term.wait_for("secret:")
    assert "ready foreground" in screen
    pid = int(screen.split("ready foreground ", 1)[1].split()[0])
    term.send("hunter2", enter=True)
    term.wait_for("got 2retnuh")
    term.wait_for("tick")
    term.key("C-z")
    term.wait_for("Stopped")
    assert stat_of(pid) == "T"
    term.send("fg", enter=True)
    deadline_ticks = term.screen().count("tick")
    import time

    time.sleep(1.5)
    assert term.screen().count("tick") > deadline_ticks and stat_of(pid) in ("S", "R")
    term.key("C-c")
    term.wait_for("run saved in")
    term.send("echo EXIT=$?", enter=True)  # fg's status is the job's
    code, screen = term.wait_for_exit()
    assert "interrupted once" in screen and "interrupted twice" not in screen and code == 0
