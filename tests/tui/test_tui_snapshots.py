"""How each TUI panel looks, from checked-in recordings (pytest-textual-snapshot).

The recording in ``tests/fixtures/recordings/slow_dataloader`` is a real TUI-mode run of
``examples/slow_dataloader.py`` (events + output.log) with machine-specific paths,
pids and wall-clock times scrubbed, so the screens are the same on every machine;
``ddp_straggler`` is the same for a 2-rank torchrun (gloo) run of
``tests/scripts_dist/ddp_straggler.py``, whose rank 1 is slow to load its data.
Regenerate them (then the snapshots, with ``--snapshot-update``) after a change of the
event format or of what the scripts print::

    OMP_NUM_THREADS=1 python tests/tui/test_tui_snapshots.py --regenerate [slow_dataloader|ddp_straggler]

The snapshots include the findings of the built-in rules and doctor's verdicts: a change
of a rule's wording shows up here too, which is the point of looking at them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from mpsprofiler.tui.panels import DISTRIBUTED_ONLY
from mpsprofiler.tui.panels import PANEL_KEYS as ALL_PANEL_KEYS

# every panel rendered by a real Textual pilot, 2-7 s each: CI's slow stage, not the
# README's quick command (under 3 minutes on 2 cores)
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
RECORDING = Path("tests/fixtures/recordings/slow_dataloader")
"""Relative to the repository root: the run directory shown on screen must not vary."""
DDP_RECORDING = Path("tests/fixtures/recordings/ddp_straggler")
SOURCES = {
    "slow_dataloader": (RECORDING, "examples/slow_dataloader.py", ["--steps", "60"], 0),
    "ddp_straggler": (DDP_RECORDING, "tests/scripts_dist/ddp_straggler.py", [], 2),
}
"""Recording name: (where it lives, the script, its arguments, ranks (0: no torchrun))."""
SIZE = (130, 40)
PANEL_KEYS = {pid: key for pid, key in ALL_PANEL_KEYS.items() if pid not in DISTRIBUTED_ONLY}
"""Every single-process panel and its key, from the registry (a new panel gets a snapshot)."""


def make_app(recording: Path = RECORDING):
    from mpsprofiler.session.recording import load_run
    from mpsprofiler.tui.app import recorded_app

    return recorded_app(load_run(recording))


@pytest.fixture
def in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)


@pytest.mark.parametrize("panel", list(PANEL_KEYS))
def test_panel_snapshot(panel: str, snap_compare, in_repo) -> None:
    assert snap_compare(make_app(), press=[PANEL_KEYS[panel], "_"], terminal_size=SIZE)


def test_help_snapshot(snap_compare, in_repo) -> None:
    assert snap_compare(make_app(), press=["question_mark", "_"], terminal_size=SIZE)


def test_ranks_snapshot(snap_compare, in_repo) -> None:
    """The Ranks panel of the 2-rank run: rank 1 marked as the straggler."""
    assert snap_compare(make_app(DDP_RECORDING), press=[ALL_PANEL_KEYS["ranks"], "_"], terminal_size=SIZE)


def test_rank_data_snapshot(snap_compare, in_repo) -> None:
    """The Data panel after ``r``: rank 1's figures, and the header says so."""
    assert snap_compare(make_app(DDP_RECORDING), press=["r", ALL_PANEL_KEYS["data"], "_"], terminal_size=SIZE)


# -- 80x24: every panel usable, figures whole ------------------------------------------------
SMALL = (80, 24)
"""The classic terminal size: numbers have priority over labels."""
SMALL_PANELS = [(RECORDING, panel, key) for panel, key in PANEL_KEYS.items()] + [
    (DDP_RECORDING, pid, ALL_PANEL_KEYS[pid]) for pid in sorted(DISTRIBUTED_ONLY)]


@pytest.mark.parametrize(("recording", "panel", "key"), SMALL_PANELS, ids=[p for _r, p, _k in SMALL_PANELS])
def test_panel_snapshot_80x24(recording: Path, panel: str, key: str, snap_compare, in_repo) -> None:
    assert snap_compare(make_app(recording), press=[key, "_"], terminal_size=SMALL)


def screen_text(app) -> str:
    """What the terminal shows, as plain text (the compositor's full frame)."""
    import io

    from rich.console import Console

    console = Console(width=app.size.width, file=io.StringIO(), record=True, color_system=None)
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text()


def test_no_figure_is_cut_to_an_ellipsis_at_80x24(in_repo) -> None:
    """At 80x24 no panel shows ``…`` next to a digit or in place of a value (the Memory
    table once showed ``…`` for every figure), and the Overview keeps At a glance."""
    import asyncio

    seen: dict[str, str] = {}

    async def main(recording: Path, keys: list[tuple[str, str]]) -> None:
        app = make_app(recording)
        app.animation_level = "none"
        async with app.run_test(size=SMALL) as pilot:
            await pilot.pause()
            for panel, key in keys:
                await pilot.press(key)
                await pilot.pause()
                seen[panel] = screen_text(app)

    asyncio.run(main(RECORDING, list(PANEL_KEYS.items())))
    asyncio.run(main(DDP_RECORDING, [("ranks", "9")]))
    for panel, text in seen.items():
        for line in text.splitlines():
            assert not re.search(r"\d…|…\s*(│|$)|\s…\s", line), f"{panel}: {line!r}"
    assert "At a glance" in seen["overview"] and "step p50" in seen["overview"]
    assert "calls/step" in seen["ops"] and "host ms/step" in seen["ops"]
    assert re.search(r"RSS total +\d", seen["memory"])


# -- regenerating the recording ------------------------------------------------------------
SCRUB_CWD = "/home/user/project"
SCRUB_PYTHON = "/usr/local/bin/python3"
SCRUB_LIB = "/usr/local/lib/python3/site-packages"


def scrub_line(line: str, cwd: str, python: str, site: str, recording: Path = RECORDING) -> str:
    """Replace what differs between machines and runs with fixed values."""
    record = json.loads(line)
    for key, value in (("started", 1767225600.0), ("wall", 1767225600.5), ("pid", 4242 + (record.get("r") or 0))):
        if key in record:
            record[key] = value
    if "run_dir" in record:
        record["run_dir"] = str(recording)
    text = json.dumps(record, separators=(",", ":"))
    for old, new in ((site, SCRUB_LIB), (python, SCRUB_PYTHON), (cwd, SCRUB_CWD)):
        text = text.replace(old, new)
    return text


def regenerate(name: str = "slow_dataloader") -> None:
    """One real TUI-mode run (output captured to output.log), scrubbed and copied here."""
    import sysconfig

    from mpsprofiler.launcher.child import RunController, RunSpec
    from mpsprofiler.launcher.distributed import plan_from_options

    recording, script, args, ranks = SOURCES[name]
    target = REPO / recording
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        run_dir.mkdir()
        os.chdir(REPO)
        plan = plan_from_options(str(ranks), [], script, False, args) if ranks else None
        spec = RunSpec(target=script, args=args, run_dir=run_dir, capture_output=True, torchrun=plan)
        controller = RunController(spec, lambda batch: None)
        controller.start()
        code = controller.wait()
        if code != 0:
            raise SystemExit(f"the example failed (exit {code}): see {run_dir / 'output.log'}")
        cwd, python, site = str(REPO), sys.executable, sysconfig.get_paths()["purelib"]
        target.mkdir(parents=True, exist_ok=True)
        lines = (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()
        (target / "events.jsonl").write_text(
            "".join(scrub_line(line, cwd, python, site, recording) + "\n" for line in lines if line.strip()), encoding="utf-8"
        )
        output = (run_dir / "output.log").read_text(encoding="utf-8")
        output = re.sub(re.escape(cwd), SCRUB_CWD, output)
        (target / "output.log").write_text(output, encoding="utf-8")
    for stale in ("summary.json", "report.md", "report.html"):
        (target / stale).unlink(missing_ok=True)
    shutil.rmtree(target / "__pycache__", ignore_errors=True)
    print(f"wrote {target}")


if __name__ == "__main__":
    if "--regenerate" in sys.argv:
        names = [a for a in sys.argv[sys.argv.index("--regenerate") + 1 :] if not a.startswith("-")]
        for recording_name in names or ["slow_dataloader"]:
            regenerate(recording_name)
    else:
        print(__doc__)
