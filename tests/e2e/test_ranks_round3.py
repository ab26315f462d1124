"""torchrun's ranks start as a single-process run does (issue 33): each rank runs the
script compiled to start the probe itself (launcher/start_code.py), so what a rank's
script sees is what it sees under plain torchrun: ``inspect.stack()`` 1 deep at the top
level, python's recursion limit and depth, ``sys.path[0]``, ``sys.argv``,
``sys.orig_argv`` (torchrun's ``-u`` kept), a ``json.py`` beside the script, signal
dispositions. Before, ranks ran ``python -u -m mpsprofiler.probe.boot`` (runpy's and the
boot's frames below the script, ``-m mpsprofiler.probe.boot`` in ``sys.orig_argv``)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import child_env, mpsprof_cli

pytestmark = pytest.mark.slow

RANK = textwrap.dedent('''\
    import inspect, json, os, signal, sys
    def depth(n):
        try:
            return depth(n + 1)
        except RecursionError:
            return n
    def say(*words):  # one write per line: the ranks share the pipe
        os.write(1, (" ".join(map(str, [os.environ["RANK"], *words])) + "\\n").encode())
    say("stack", len(inspect.stack()), "limit", sys.getrecursionlimit(), "depth", depth(0))
    say("path0", sys.path[0] == os.path.dirname(os.path.realpath(__file__)), sys.argv, __file__)
    say("orig", sys.orig_argv[1:], "json", getattr(json, "MARK", None))
    say("signals", [str(signal.getsignal(s)) for s in (signal.SIGINT, signal.SIGUSR1, signal.SIGHUP)])
''')


def test_ranks_see_what_plain_torchrun_gives(tmp_path: Path) -> None:
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "rank.py").write_text(RANK)
    (tmp_path / "code" / "json.py").write_text("MARK = 'the user json'\n")  # beside the script, not in the cwd
    env = child_env()
    script = str(tmp_path / "code" / "rank.py")
    plain = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--standalone",
                            script, "an arg"], env=env, capture_output=True, timeout=180, cwd=tmp_path)
    profiled = mpsprof_cli("run", "--headless", "-o", str(tmp_path / "run"), "--nproc-per-node", "2", script, "an arg",
                           env=env, timeout=180, cwd=tmp_path)
    assert plain.returncode == 0 == profiled.returncode, (plain.stderr[-2000:], profiled.stderr[-2000:])
    plain_lines = sorted(plain.stdout.decode().splitlines())
    assert sorted(profiled.stdout.splitlines()) == plain_lines
    assert [line for line in plain_lines if " stack 1 limit " in line] and len(plain_lines) == 8, plain_lines
    assert all("the user json" in line for line in plain_lines if " orig " in line)
