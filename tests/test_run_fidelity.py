"""``mpsprof run`` starts the script as ``python`` would: argv verbatim, inherited file
descriptors, signals and the terminal. Each test compares a plain run with a profiled one
through the real CLI (see tests/helpers.py)."""

from __future__ import annotations

from pathlib import Path

from helpers import SCRIPTS, compare


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
