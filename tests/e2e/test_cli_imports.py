"""Every ``mpsprof`` command builds the whole parser (each subcommand declares its options),
so what those modules import at the top is paid by every command: ``mpsprof run`` must not
load libcst (a second of start-up, and its DeprecationWarnings under ``-W always``, which
reach the output of a profiled script) just because ``mpsprof patch`` exists."""

from __future__ import annotations

import subprocess
import sys

from helpers import child_env


def test_building_the_parser_loads_no_code_editing_library() -> None:
    code = ("import sys; from mpsprofiler.cli import build_parser; build_parser(); "
            "print(sorted(m for m in ('libcst', 'textual', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=child_env(), check=True)
    assert out.stdout.strip() == "[]", out.stdout
