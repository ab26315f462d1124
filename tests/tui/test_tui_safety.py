"""The TUI never harms the training: script text is data (never markup), a full disk,
stdin, signals and file descriptors behave as under plain ``python``.

Live runs start real scripts through the app's own controller (as ``mpsprof run`` does)
under Textual's pilot; the terminal-level behaviour (stdin, the tty) runs the real CLI
in tmux.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from helpers import mpsprof_cli
from mpsprofiler.launcher.child import RunSpec
from mpsprofiler.session.recording import load_run
from mpsprofiler.session.session import Session
from mpsprofiler.tui.app import MpsprofApp, recorded_app
from mpsprofiler.tui.panels import DISTRIBUTED_ONLY, PANEL_IDS, PANEL_KEYS
from mpsprofiler.tui.widgets.log_panel import LogPanel

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "tests" / "scripts"
SIZE = (130, 40)


def drive(app: MpsprofApp, body: Any) -> None:
    """Run the app under the pilot; an exception inside the app (a MarkupError at render
    time included) fails the test."""
    app.animation_level = "none"

    async def main() -> None:
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            await body(pilot)

    asyncio.run(main())


async def wait_for(pilot: Any, condition: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for the app"
        await pilot.pause(0.1)


async def visit_every_panel(app: MpsprofApp, pilot: Any) -> None:
    for pid in PANEL_IDS:
        if pid in DISTRIBUTED_ONLY:
            continue
        await pilot.press(PANEL_KEYS[pid])
        await pilot.pause(0.2)
        assert app.query_one("#panels").active == pid


# -- item: script text is data -------------------------------------------------------------
@pytest.mark.slow
def test_script_text_with_markup_never_crashes_the_live_app(tmp_path: Path) -> None:
    """``[/x]`` in argv, in output, in a warning and in the crash message (and so in the
    crash notification): every panel draws it as text."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    spec = RunSpec(target=str(SCRIPTS / "markup_text.py"), args=["[/x]", "--name=[b]"], run_dir=run_dir,
                   capture_output=True)
    app = MpsprofApp(Session(), [], spec=spec, run_dir=run_dir)

    async def body(pilot: Any) -> None:
        await wait_for(pilot, lambda: app.results is not None)
        await pilot.pause(0.3)  # the crash notification is drawn
        assert any("[/data/train]" in str(n.message) for n in app._notifications)
        await visit_every_panel(app, pilot)
        lines = app.query_one(LogPanel).output.buffer.plain_lines()
        assert "[/x] a closing tag, [bold]bold?[/] and an open [red" in lines
        await pilot.press("8")
        await pilot.pause(0.2)
        screen = app.export_screenshot()
        assert "config value [/] ignored" in _unhtml(screen)
        assert "no data in [/data/train]" in _unhtml(screen)
        await pilot.press("7")
        await pilot.pause(0.2)
        environment = _unhtml(app.export_screenshot())  # argv wraps where the checkout's path is long
        assert "[/x]" in environment and "--name=[b]" in environment

    drive(app, body)
    assert app.returncode == 1 and app.session.status == "crashed"


def _unhtml(svg: str) -> str:
    """The text of a Textual SVG screenshot (non-breaking spaces and entities undone)."""
    import html
    import re

    text = html.unescape(re.sub(r"<[^>]+>", "", svg))
    return text.replace("\xa0", " ")


def odd_recording(source: Path, target: Path) -> Path:
    """A copy of a real recording whose values are odd: markup in every string the views
    show, a count that is a string, NaN and inf where numbers belong."""
    target.mkdir()
    lines = []
    for line in (source / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        kind = event["k"]
        if kind == "run":
            event["argv"] = [event["argv"][0], "[/x]", "--name=[b]"]
            event["cwd"] = "/data/[/train]"
        elif kind == "model":
            event.update(parameters="12M", optimizer="[/opt]", device_name="[/dev]")
        elif kind == "steps":
            event["dur"][0] = float("nan")
            event["wait"][-1] = float("inf")
        elif kind == "mem":
            event["rss"] = float("nan")
        elif kind == "dataloader":
            event["dataset"] = "[/ds]"
        elif kind == "exit":
            event.update(duration=float("nan"), returncode=-2, signal=2, signal_name="[/SIG]")
        lines.append(json.dumps(event))
    lines.append(json.dumps({"k": "warning", "ts": 1.0, "category": "UserWarning", "message": "config value [/] ignored",
                             "filename": "/x/[/y].py", "lineno": 3}))
    (target / "events.jsonl").write_text("\n".join(lines) + "\n")
    (target / "output.log").write_text("[/x] output\n")
    return target


@pytest.mark.slow
def test_view_draws_odd_recorded_values_raw(tmp_path: Path) -> None:
    """``mpsprof view`` of a recording with markup, NaN and a string count: every panel
    draws, and what cannot be formatted shows as recorded ("12M")."""
    source = tmp_path / "source"
    proc = mpsprof_cli("run", "--headless", "-o", str(source), str(REPO / "examples" / "slow_dataloader.py"),
                       "--steps", "8", cwd=REPO, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    app = recorded_app(load_run(odd_recording(source, tmp_path / "odd")))

    async def body(pilot: Any) -> None:
        await pilot.pause(0.3)
        text = _unhtml(app.export_screenshot())
        assert "12M float32" in text and "crashed ([/SIG])" in text
        await visit_every_panel(app, pilot)
        assert not app._panel_errors

    drive(app, body)


# -- item: a full disk costs the copy, never the script's prints ------------------------------
@pytest.fixture
def tiny_disk(tmp_path: Path):
    """A real 256 KiB filesystem (tmpfs; needs root, skipped otherwise)."""
    import subprocess

    mount = tmp_path / "tiny"
    mount.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], capture_output=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs: {proc.stderr.decode(errors='replace').strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


@pytest.mark.slow
def test_full_disk_in_the_tui_keeps_the_training_going(tiny_disk: Path) -> None:
    """The run directory's disk fills while the script prints 1 MB: under python the
    prints succeed, so they must here (they raised ENOSPC and ended the script); the view
    keeps showing the output and says once that output.log stopped."""
    run_dir = tiny_disk / "run"
    run_dir.mkdir()
    spec = RunSpec(target=str(SCRIPTS / "chatty.py"), run_dir=run_dir, capture_output=True)
    app = MpsprofApp(Session(), [], spec=spec, run_dir=run_dir)

    lines: list[str] = []

    async def body(pilot: Any) -> None:
        await wait_for(pilot, lambda: app.results is not None)
        buffer = app.query_one(LogPanel).output.buffer
        await wait_for(pilot, lambda: "done" in buffer.plain_lines(), timeout=10)
        lines.extend(buffer.plain_lines())
        said = [n for n in app._notifications if "output.log is no longer written" in str(n.message)]
        assert len(said) == 1 and "No space left" in str(said[0].message)

    drive(app, body)
    assert app.returncode == 0 and app.session.status == "finished"
    assert lines[-2].startswith(" 1999 ") and lines[-1] == "done"


# -- item: kill -INT to mpsprof is one KeyboardInterrupt in the script ----------------------
@pytest.mark.slow
def test_sigint_to_the_tui_reaches_the_script_once_and_the_app_follows(tmp_path: Path) -> None:
    """``kill -INT <mpsprof pid>`` while the TUI runs a script: the script gets that one
    SIGINT (KeyboardInterrupt, as under python), nothing after it, and the app leaves when
    the script has ended. (Before, the app died at once and the script got SIGINT, then
    SIGTERM after 2 s.)"""
    import os
    import signal

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    spec = RunSpec(target=str(SCRIPTS / "sleeper.py"), run_dir=run_dir, capture_output=True)
    app = MpsprofApp(Session(), [], spec=spec, run_dir=run_dir)
    got: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))  # the app's own replaces it

    async def body(pilot: Any) -> None:
        await wait_for(pilot, lambda: "ready" in app.query_one(LogPanel).output.buffer.plain_lines())
        os.kill(os.getpid(), signal.SIGINT)
        deadline = time.monotonic() + 20
        while app.is_running and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert not app.is_running, "the app did not leave after the script ended"

    try:
        drive(app, body)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert not got, "the app did not handle SIGINT"
    assert app.returncode == -signal.SIGINT
    output = (run_dir / "output.log").read_text()
    assert output.count("KeyboardInterrupt") == 1 and "not interrupted" not in output


# -- item: input() and breakpoint() get the terminal ----------------------------------------
@pytest.mark.slow
def test_input_and_breakpoint_get_the_terminal_in_the_tui(tmp_path: Path) -> None:
    """Under the TUI (a real terminal, tmux) ``input()`` and ``breakpoint()`` are answered
    at the terminal: the app steps aside while the script reads, pdb stops in the script's
    frame, and the view comes back when the script goes on (before: EOFError, BdbQuit)."""
    from tmux import Tmux, mpsprof_line

    term = Tmux(tmp_path)
    try:
        run_dir = tmp_path / "run"
        term.send(mpsprof_line("run", "-o", str(run_dir), str(SCRIPTS / "asks.py")), enter=True)
        screen = term.wait_for("your name?")
        assert "the script reads the terminal" in screen and "before the question" in screen
        term.send("Ada", enter=True)
        term.wait_for("(Pdb)")
        term.send("p x + 1", enter=True)
        screen = term.wait_for("42")
        assert "asks.py" in screen and "hello Ada" in screen  # pdb stops in the script's own frame
        term.send("c", enter=True)
        term.wait_for("The script finished")  # the view is back
        term.key("6")
        deadline = time.monotonic() + 30  # the Log panel redraws about once a second
        while not {"x is 41", "done"} <= {line.strip() for line in term.screen(history=False).splitlines()}:
            assert time.monotonic() < deadline, term.screen(history=False)
            time.sleep(0.2)
        term.key("q")
        code, _ = term.wait_for_exit()
        assert code == 0
    finally:
        term.close()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "finished"
