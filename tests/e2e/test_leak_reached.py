"""A loss summed in an attribute or a dict entry keeps every step's graph, through the real CLI.

``total += loss`` on a local was found (graph-kept-across-steps); ``self.total += loss`` in a
trainer's method, ``stats["loss"] = stats["loss"] + loss`` on a local dict and
``self.stats["loss"] += loss`` in a logger object were not: the check read frame locals
only (probe/leak_reach.py now reads one attribute or entry further). The finding names
the expression as the script writes it and the line that accumulates; `mpsprof patch`
rewrites that line and the patched script runs clean. The clean twins (``.item()``), with a
model, an Adam state, a replaced ``self.best``/``self.last_out`` and a detached metric
state held by the same trainer, stay silent.
"""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from test_leaks import LEAK_RULES, SCRIPTS, _findings, _line_of, _run

from helpers import mpsprof_cli, read_summary

pytestmark = pytest.mark.slow


LEAKY = ("trainer_total", "stats_dict")


@pytest.fixture(scope="module")
def leaky(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """Each leaky script as written (no arguments) copied and recorded once, both at once:
    name -> (the copy, its run). The tests that name the leak read the recording; the patch
    test patches and applies it to that copy and runs the patched copy again (its own first
    run was a second recording of the same script)."""
    base = tmp_path_factory.mktemp("reached")

    def record(name: str) -> tuple[Path, Path]:
        (base / name).mkdir()
        script, run = base / name / f"{name}.py", base / name / "run"
        shutil.copy(SCRIPTS / f"{name}.py", script)
        proc = mpsprof_cli("run", "--headless", "-o", str(run), str(script))
        assert proc.returncode == 0, proc.stderr[-3000:]
        return script, run

    with ThreadPoolExecutor(2) as pool:
        return dict(zip(LEAKY, pool.map(record, LEAKY), strict=True))


def _carry(summary: dict) -> dict:
    found = _findings(summary)
    assert "graph-kept-across-steps" in found, [f["rule"] for f in summary["findings"]]
    return found["graph-kept-across-steps"]


def test_an_attribute_summed_in_a_method_is_named_at_its_line_and_the_item_twin_is_silent(
        tmp_path: Path, leaky: dict[str, tuple[Path, Path]]) -> None:
    clean = _run(tmp_path, "trainer_total", "--item")
    carry = _carry(read_summary(leaky["trainer_total"][1]))
    line = _line_of("trainer_total", "self.total += loss")
    assert f"`self.total` keeps every step's autograd graph alive (trainer_total.py:{line})" == carry["title"]
    assert "(`self.total += loss`)" in carry["evidence"]
    assert "self.total += loss.detach()" in carry["fix"] and "self.total += loss.item()" in carry["fix"]
    assert "autograd nodes" in carry["evidence"] and "0.0 KiB" not in carry["evidence"]
    assert not LEAK_RULES & set(_findings(clean)), clean["findings"]


def test_a_dict_entry_of_a_local_and_of_an_object_are_named_as_written(tmp_path: Path,
                                                                      leaky: dict[str, tuple[Path, Path]]) -> None:
    logger = _run(tmp_path, "stats_dict", "--logger")
    carry = _carry(read_summary(leaky["stats_dict"][1]))
    written = 'stats["loss"] = stats["loss"] + loss'
    assert f"`stats[\"loss\"]` keeps every step's autograd graph alive (stats_dict.py:{_line_of('stats_dict', written)})" \
        == carry["title"]
    assert 'stats["loss"] = (stats["loss"] + loss).detach()' in carry["fix"], carry["fix"]
    # reached from `logger` in train(); written `self.stats["loss"] += loss` in Logger.log
    carry = _carry(logger)
    line = _line_of("stats_dict", 'self.stats["loss"] += loss')
    assert f"`self.stats[\"loss\"]` keeps every step's autograd graph alive (stats_dict.py:{line})" == carry["title"]
    assert 'self.stats["loss"] += loss.detach()' in carry["fix"], carry["fix"]


def test_the_dict_entry_item_twin_is_silent(tmp_path: Path) -> None:
    clean = _run(tmp_path, "stats_dict", "--item")
    assert not LEAK_RULES & set(_findings(clean)), clean["findings"]


@pytest.mark.parametrize("name", ["trainer_total", "stats_dict"])
def test_patch_rewrites_the_line_and_the_patched_script_runs_clean(tmp_path: Path, name: str,
                                                                  leaky: dict[str, tuple[Path, Path]]) -> None:
    script, run = leaky[name]  # the recording the tests above read: they read it only
    _carry(read_summary(run))
    proc = mpsprof_cli("patch", "--apply", "--no-proof", str(run))
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = script.read_text()
    assert ("self.total += loss.detach()" if name == "trainer_total"
            else 'stats["loss"] = (stats["loss"] + loss).detach()') in text, text
    proc = mpsprof_cli("run", "--headless", "-o", str(tmp_path / "patched"), str(script))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not LEAK_RULES & set(_findings(read_summary(tmp_path / "patched")))
