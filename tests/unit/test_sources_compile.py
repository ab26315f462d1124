"""Every module of mpsprofiler compiles without a warning. Python warns when it compiles a
source (no cached .pyc: a fresh install, a checkout) with an invalid escape sequence
(DeprecationWarning, SyntaxWarning from 3.12): under ``PYTHONWARNINGS=always`` the launcher
printed one into the script's output, and under ``PYTHONWARNINGS=error`` the import fails."""

from __future__ import annotations

import warnings
from pathlib import Path

import mpsprofiler

PACKAGE = Path(mpsprofiler.__file__).parent


def test_every_module_compiles_without_a_warning() -> None:
    failed = []
    for path in sorted(PACKAGE.rglob("*.py")):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                compile(path.read_text(encoding="utf-8"), str(path), "exec")
            except (SyntaxError, Warning) as exc:
                failed.append(f"{path.relative_to(PACKAGE)}: {exc}")
    assert failed == []
