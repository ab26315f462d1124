"""What ``mpsprof --help``, the subcommands' help and ``mpsprof rules`` print (real CLI)."""

from __future__ import annotations

import re

from helpers import child_env, mpsprof_cli

SUBCOMMANDS = ("run", "demo", "view", "report", "doctor", "bench", "rules")


def test_every_subcommand_help_has_a_description_and_no_undocumented_option() -> None:
    for name in SUBCOMMANDS:
        proc = mpsprof_cli(name, "--help", timeout=60, stdin=None)
        assert proc.returncode == 0, proc.stderr
        text = proc.stdout
        body = text.split("\n\n")
        assert len(body) > 2 and not body[1].lstrip().startswith(("positional", "options")), f"{name}: no description"
        # an option line with no help text after it: "  --format {md,...}" alone and then another option
        for line, following in zip(text.splitlines(), text.splitlines()[1:] + [""], strict=True):
            if re.match(r"^  -", line) and len(line.split("  ")) <= 2 and not following.startswith(" " * 10):
                assert line.strip().startswith("-h"), f"{name}: {line.strip()!r} has no help"
    demo = mpsprof_cli("demo", "--help", timeout=60, stdin=None)
    assert "--nproc-per-node" not in str(demo.stdout)


def test_rules_listing_fits_80_columns_and_shows_no_raw_templates() -> None:
    proc = mpsprof_cli("rules", timeout=60, stdin=None, env=child_env(COLUMNS="80"))
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    lines = text.splitlines()
    assert len(lines) > 10 and max(len(line) for line in lines[:-1]) <= 80
    assert "{" not in text and "<crash devices>" in text
    assert re.search(r"^dataloader-stall-critical +critical", text, re.M)
