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
