"""The low watermark ratio ``--set`` pairs with a high one: "added" only where the shell
had none; where the shell had its own, the report says it was replaced, and from what."""

from __future__ import annotations

from typing import Any

from mpsprofiler.report.changes import change_lines
from mpsprofiler.settings import parse_settings, shell_replaced

HIGH = "PYTORCH_MPS_HIGH_WATERMARK_RATIO"
LOW = "PYTORCH_MPS_LOW_WATERMARK_RATIO"


def _lines(items: list[str], shell: dict[str, str]) -> list[str]:
    """What the report says of the run ``--set items`` starts from a shell with ``shell``."""
    from mpsprofiler.settings import describe

    settings = parse_settings(items, shell)
    changes: dict[str, Any] = {"asked": describe(settings), "applied": [], "skipped": []}
    replaced = shell_replaced(settings, shell)
    if replaced:
        changes["replaced"] = replaced
    return change_lines({"changes": changes})  # type: ignore[typeddict-item]


def test_the_shells_low_ratio_replaced_is_said_with_its_value() -> None:
    """Before: the shell's 1.2 became 0.8 "(added by mpsprof ...)"."""
    settings = parse_settings([f"env.{HIGH}=1.0"], {LOW: "1.2"})
    assert settings["env"] == {HIGH: "1.0", LOW: "0.8"}
    assert shell_replaced(settings, {LOW: "1.2"}) == {LOW: "1.2"}
    line = next(x for x in _lines([f"env.{HIGH}=1.0"], {LOW: "1.2"}) if x.startswith(f"environment: {LOW}"))
    assert "replaced" in line and "your shell had 1.2" in line and "added" not in line, line


def test_a_low_ratio_the_shell_did_not_have_is_added() -> None:
    line = next(x for x in _lines([f"env.{HIGH}=1.0"], {}) if x.startswith(f"environment: {LOW}"))
    assert line == f"environment: {LOW}=0.8 (added by mpsprof: torch refuses a low watermark ratio above the high one)"
    assert shell_replaced(parse_settings([f"env.{HIGH}=1.0"], {}), {}) == {}


def test_another_variable_the_shell_had_says_the_shells_value() -> None:
    assert _lines(["env.OMP_NUM_THREADS=2"], {"OMP_NUM_THREADS": "8"}) == [
        "environment: OMP_NUM_THREADS=2 (your shell had 8)"]
    assert _lines(["env.OMP_NUM_THREADS=2"], {"OMP_NUM_THREADS": "2"}) == ["environment: OMP_NUM_THREADS=2"]
