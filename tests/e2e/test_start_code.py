"""The script compiled to start the probe itself (launcher/start_code.py), run directly
by python without a channel (no probe): what the script sees and does is python's, for
the shapes of a module body the syntax-tree edit must keep (docstring, ``__future__``
imports, an empty file, a global ``exec`` of the script's own, an uncaught exception)."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from helpers import child_env
from mpsprofiler.launcher.start_code import compile_script, remove_compiled

BODIES = {
    "doc_future": '"""doc"""\nfrom __future__ import annotations\nx: int = 1\nprint(__doc__, __annotations__)\n',
    "empty": "",
    "only_doc": '"""only"""\n',
    "own_exec": "def exec(*a):\n    print('user exec', a)\nexec(1)\nraise SystemExit(3)\n",
    "uncaught": "def f():\n    raise ValueError('x')\nf()\n",
    "top_names": "print(sorted(k for k in globals() if not k.startswith('__')), __name__, __spec__)\n",
    # compile-time warnings, said as python says them before the first line (a
    # SyntaxWarning; an invalid escape, a DeprecationWarning before 3.12, shown or not by
    # the filters as under python), and the stack still python's at the top level
    "compile_warnings": ('"""doc"""\nimport inspect, re\nx = 1\nprint(x is 1, re.findall("\\d", "a1"))\n'
                         'print(len(inspect.stack()))\n'),
}


@pytest.mark.parametrize("name", sorted(BODIES))
def test_compiled_script_runs_as_python_runs_it(tmp_path: Path, name: str) -> None:
    script = tmp_path / f"{name}.py"
    script.write_text(BODIES[name])
    env = child_env()
    compiled = compile_script(str(script), None, env)
    assert compiled is not None
    try:
        plain = subprocess.run([sys.executable, str(script), "arg"], capture_output=True, env=env, timeout=60)
        ours = subprocess.run([sys.executable, compiled, "arg"], capture_output=True, env=env, timeout=60)
        left = Path(compiled).parent.exists()  # the child removed it as it started: nothing left if mpsprof dies
    finally:
        remove_compiled(compiled)
    assert (ours.returncode, ours.stdout, ours.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    assert not left


def test_a_script_that_does_not_compile_leaves_nothing(tmp_path: Path) -> None:
    """No compiled file (the start program runs it and python reports the error or the
    compile-time warning in the child), and no private folder left behind."""
    script = tmp_path / "bad.py"
    script.write_text("x = (\n")
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "mpsprof-start-*")))
    assert compile_script(str(script), None, {}) is None
    assert compile_script(str(tmp_path), None, {}) is None  # a directory: run by its __main__
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "mpsprof-start-*"))) == before


def test_the_compiled_file_is_named_as_the_script(tmp_path: Path) -> None:
    """torchrun's failure message and ``ps`` name the file python was given."""
    script = tmp_path / "train_me.py"
    script.write_text("pass\n")
    compiled = compile_script(str(script), None, child_env(), keep=True)
    assert compiled is not None and os.path.basename(compiled) == "train_me.py" and compiled != str(script)
    try:  # kept (torchrun's ranks and restarts run it again) until the launcher removes it
        for _ in range(2):
            assert subprocess.run([sys.executable, compiled], env=child_env(), timeout=60).returncode == 0
        assert os.path.exists(compiled)
    finally:
        remove_compiled(compiled)
    assert not os.path.exists(os.path.dirname(compiled))


def test_a_boot_that_cannot_start_leaves_the_script_as_python_runs_it(tmp_path: Path) -> None:
    """An mpsprofiler found first on the path that lacks what the prelude calls (another
    version): one 'profiler disabled' line, and the script still runs with python's
    argv, ``sys.path[0]`` and exit status."""
    fake = tmp_path / "other" / "mpsprofiler" / "probe"
    fake.mkdir(parents=True)
    (fake.parent / "__init__.py").write_text("")
    (fake / "__init__.py").write_text("")
    (fake / "boot.py").write_text("")
    script = tmp_path / "s.py"
    script.write_text("import sys, os\nprint(sys.argv, sys.path[0] == os.path.dirname(__file__))\nsys.exit(4)\n")
    env = child_env(PYTHONPATH=str(tmp_path / "other"))
    compiled = compile_script(str(script), None, env)
    assert compiled is not None
    try:
        plain = subprocess.run([sys.executable, str(script), "x"], capture_output=True, env=env, timeout=60)
        ours = subprocess.run([sys.executable, compiled, "x"], capture_output=True, env=env, timeout=60)
    finally:
        remove_compiled(compiled)
    assert (ours.returncode, ours.stdout) == (plain.returncode, plain.stdout) == (4, f"['{script}', 'x'] True\n".encode())
    assert ours.stderr.decode().startswith("mpsprof: profiler disabled (AttributeError") and ours.stderr.count(b"\n") == 1


def test_a_relative_path_is_kept_as_python_keeps_it(tmp_path: Path) -> None:
    """``python ./../rel.py``: ``__file__`` and the traceback's file name are the working
    directory joined to the path, ``..`` and ``.`` kept (they were normalized)."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "rel.py").write_text("import sys\nprint(__file__, sys.argv[0], sys.path[0])\n1 / 0\n")
    env = child_env()
    compiled = compile_script("./../rel.py", str(tmp_path / "sub"), env)
    assert compiled is not None
    try:
        run = dict(capture_output=True, env=env, timeout=60, cwd=tmp_path / "sub")
        plain = subprocess.run([sys.executable, "./../rel.py"], **run)  # type: ignore[call-overload]
        ours = subprocess.run([sys.executable, compiled], **run)  # type: ignore[call-overload]
    finally:
        remove_compiled(compiled)
    assert b"/sub/./../rel.py" in plain.stdout and b'/sub/./../rel.py", line 3' in plain.stderr
    assert (ours.returncode, ours.stdout, ours.stderr) == (plain.returncode, plain.stdout, plain.stderr)
