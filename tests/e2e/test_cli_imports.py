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


def test_a_command_builds_only_its_own_options() -> None:
    """``mpsprof run`` (every profiled run) does not import the other commands' modules to
    declare options it will not parse; each command still parses its own."""
    others = ("mpsprofiler.experiment.command", "mpsprofiler.patch.command", "mpsprofiler.compare",
              "mpsprofiler.doctor", "mpsprofiler.bench", "mpsprofiler.rules_cli")
    code = ("import sys; from mpsprofiler.cli import build_parser; build_parser('run'); "
            f"print(sorted(m for m in {others!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=child_env(), check=True)
    assert out.stdout.strip() == "[]", out.stdout
    from mpsprofiler import cli

    args = cli._parse(cli.build_parser("try"), ["try", "--pairs", "3", "--set", "dataloader.num_workers=2", "x.py"])
    assert args.pairs == 3
    args = cli._parse(cli.build_parser("rules"), ["rules", "check", "x.yaml"])
    assert args.command == "rules"
