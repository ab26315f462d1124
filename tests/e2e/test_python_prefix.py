"""``mpsprof run python train.py ...`` (the order of py-spy and scalene): it said "no such
script: python". The interpreter is dropped where it is mpsprof's own; another interpreter
(a venv's, whose packages are not mpsprof's) and interpreter options are refused with the
command that works (cli_args.python_prefix)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO, mpsprof_cli

EXITS = REPO / "tests" / "scripts" / "exits.py"


@pytest.mark.slow
def test_python_before_the_script_runs_it_as_without(tmp_path: Path) -> None:
    bare = subprocess.run([sys.executable, str(EXITS), "2"], capture_output=True, text=True, timeout=60)
    proc = mpsprof_cli("run", "--headless", "-o", str(tmp_path / "run"), sys.executable, str(EXITS), "2")
    assert (proc.returncode, bare.returncode) == (2, 2), proc.stderr[-2000:]
    assert proc.stdout.startswith(bare.stdout), (proc.stdout, bare.stdout)
    assert "no such script" not in proc.stderr
    # the module form, with -u before it, from the script's folder
    (tmp_path / "trainmod.py").write_text("import sys\nprint('module args', sys.argv[1:])\n")
    proc = mpsprof_cli("run", "--headless", "-o", str(tmp_path / "run2"), sys.executable, "-u", "-m", "trainmod", "x",
                       cwd=tmp_path)
    assert proc.returncode == 0 and "module args ['x']" in proc.stdout, proc.stderr[-2000:]


def test_an_interpreter_option_is_refused_with_the_command_that_works(tmp_path: Path) -> None:
    proc = mpsprof_cli("run", "--headless", "-o", str(tmp_path / "run"), sys.executable, "-O", str(EXITS), "0")
    assert proc.returncode == 2 and f"{Path(sys.executable).name} -O: interpreter options are not passed on" in proc.stderr, \
        proc.stderr
    assert f"mpsprof run {EXITS} 0" in proc.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_another_interpreter_is_refused_not_run_with_mpsprofs_packages(tmp_path: Path) -> None:
    """A venv's python links to the base interpreter (the same file), but its packages are
    its own: running the script with mpsprof's would train with other packages."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True, timeout=120)
    other = tmp_path / "venv" / "bin" / "python"
    proc = mpsprof_cli("run", "--headless", "-o", str(tmp_path / "run"), str(other), str(EXITS), "0")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"{other} is another Python than the one mpsprof runs in" in proc.stderr
    assert f"{other} -m mpsprofiler run {EXITS} 0" in proc.stderr
    assert "out before" not in proc.stdout
