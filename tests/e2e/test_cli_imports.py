"""Every ``mpsprof`` command builds the whole parser (each subcommand declares its options),
so what those modules import at the top is paid by every command: ``mpsprof run`` must not
load libcst (a second of start-up, and its DeprecationWarnings under ``-W always``, which
reach the output of a profiled script) just because ``mpsprof patch`` exists."""

from __future__ import annotations

import subprocess
import sys

import pytest

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


def test_the_top_level_help_declares_no_command_options(monkeypatch: pytest.MonkeyPatch) -> None:
    """``mpsprof``, ``mpsprof --help`` and ``--version`` name the commands and their summaries
    only: no module is imported to declare options that help does not show (``try``'s alone
    pulled in the whole diagnosis; ``run``'s the launcher's options and the settings, ``report``'s
    the renderers' registry), and the help reads as the whole parser's."""
    modules = ("mpsprofiler.experiment", "mpsprofiler.patch", "mpsprofiler.compare", "mpsprofiler.doctor",
               "mpsprofiler.bench", "mpsprofiler.rules_cli", "mpsprofiler.results", "mpsprofiler.diagnosis",
               "mpsprofiler.launcher", "mpsprofiler.settings", "mpsprofiler.report")
    code = ("import contextlib, io, sys; from mpsprofiler.cli import main\n"
            "out = io.StringIO()\n"
            "with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit): main(sys.argv[1:])\n"
            f"print(sorted(m for m in {modules!r} if m in sys.modules)); print(out.getvalue())")
    from mpsprofiler import cli

    monkeypatch.setenv("COLUMNS", "100")  # argparse wraps at the terminal's width, here and in the child
    whole = cli.build_parser().format_help()
    for argv in (["--help"], [], ["--version"]):
        out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                             env={**child_env(), "COLUMNS": "100"}, check=True).stdout
        loaded, _, printed = out.partition("\n")
        assert loaded == "[]", (argv, loaded)
        if argv != ["--version"]:
            assert printed.strip() == whole.strip()
        else:
            assert printed.startswith("mpsprof ")
