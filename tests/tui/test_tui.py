"""The TUI's behaviour, driven with Textual's Pilot.

Recorded runs are real runs of the bundled example through the real CLI (headless, so
the recording is what ``mpsprof view`` opens); the live tests start real scripts through
the app's own controller and stop them from the keyboard.
"""

from __future__ import annotations

import asyncio
import html
import io
import json
import os
import shutil
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from helpers import mpsprof_cli, read_summary
from mpsprofiler.events import KIND_EXCEPTION, Event
from mpsprofiler.launcher.child import RunSpec
from mpsprofiler.session.recording import load_run
from mpsprofiler.session.session import Session
from mpsprofiler.session.steps import StepPoint
from mpsprofiler.tui.app import MpsprofApp, recorded_app
from mpsprofiler.tui.inbox import EventInbox
from mpsprofiler.tui.panels import DISTRIBUTED_ONLY, PANEL_IDS, PANEL_KEYS
from mpsprofiler.tui.screens.confirm import ConfirmQuitScreen
from mpsprofiler.tui.screens.help import HelpScreen
from mpsprofiler.tui.state import RunState, recent_rate
from mpsprofiler.tui.terminal import TerminalBuffer
from mpsprofiler.tui.widgets.findings import FindingsPanel, escape_tags
from mpsprofiler.tui.widgets.header import RunHeader
from mpsprofiler.tui.widgets.log_panel import LogPanel
from mpsprofiler.tui.widgets.warnings import crash_rank
from mpsprofiler.units import fmt_pct

REPO = Path(__file__).resolve().parents[2]
SIZE = (130, 40)
DDP_RECORDING = REPO / "tests" / "fixtures" / "recordings" / "ddp_straggler"
"""A checked-in 2-rank torchrun run of tests/scripts_dist/ddp_straggler.py (rank 1 is slow
to load its data); see tests/tui/test_tui_snapshots.py for how it is regenerated."""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real headless recording of the slow-DataLoader example (30 steps)."""
    run_dir = tmp_path_factory.mktemp("tui") / "run"
    proc = mpsprof_cli("run", "--headless", "-o", str(run_dir), str(REPO / "examples" / "slow_dataloader.py"),
                       "--steps", "30", cwd=REPO, timeout=180, stdin=None)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return run_dir


@pytest.fixture
def run_copy(recorded: Path, tmp_path: Path) -> Path:
    """A private copy, so a test may write reports into it."""
    target = tmp_path / "run"
    shutil.copytree(recorded, target)
    return target


def drive(app: MpsprofApp, body: Callable[[Any], Awaitable[None]]) -> None:
    app.animation_level = "none"  # no tab-underline animation to wait for

    async def main() -> None:
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            await body(pilot)

    asyncio.run(main())


async def wait_for(pilot: Any, condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting for the app"
        await pilot.pause(0.1)


def header_text(app: MpsprofApp, selector: str) -> str:
    return str(app.query_one(RunHeader).query_one(selector).render())


def plain(widget: Any) -> str:
    """What a Static shows, as plain text (its content may be any Rich renderable)."""
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


# -- recorded runs -------------------------------------------------------------------------
def test_number_keys_and_tab_switch_panels(recorded: Path) -> None:
    app = recorded_app(load_run(recorded))

    async def body(pilot: Any) -> None:
        tabs = app.query_one("#panels")
        single = [pid for pid in PANEL_IDS if pid not in DISTRIBUTED_ONLY]
        for pid in PANEL_IDS:
            await pilot.press(PANEL_KEYS[pid])
            if pid in DISTRIBUTED_ONLY:  # a single process: no Ranks panel, a note instead
                assert tabs.active == single[-1]
                assert any("no ranks" in str(n.message) for n in app._notifications)
            else:
                assert tabs.active == pid
        await pilot.press("1", "tab")
        assert tabs.active == single[1]
        await pilot.press("shift+tab", "shift+tab")
        assert tabs.active == single[-1]
        assert "finished" in header_text(app, "#hdr-status")
        assert "30" in header_text(app, "#hdr-step")
        assert not app.query_one("#hdr-rank").display
        await pilot.press("r")  # no ranks to cycle: a note says why
        assert app.state.rank is None and app.state.session is app.session
        assert "only one rank" in str(list(app._notifications)[-1].message)
        await pilot.press("s")  # a recorded run: nothing to stop, and a note says so
        assert "no script to stop" in str(list(app._notifications)[-1].message)

    drive(app, body)


def test_select_a_finding_and_copy_its_fix(recorded: Path) -> None:
    loaded = load_run(recorded)
    app = recorded_app(loaded)
    findings = app.state.findings
    assert findings, "the slow-DataLoader example should produce a finding"

    async def body(pilot: Any) -> None:
        await pilot.press("2")
        panel = app.query_one(FindingsPanel)
        await pilot.pause()
        target = findings[-1]
        for _ in range(len(findings) - 1):
            await pilot.press("down")
        await pilot.pause()
        assert panel.selected is target
        markdown = app.query_one("#fd-markdown").source
        assert target.title in markdown and target.evidence.strip()[:40] in markdown
        await pilot.press("c")
        from mpsprofiler.tui.copy_fix import fix_to_copy

        assert app.clipboard == fix_to_copy(target.fix)  # the code blocks (issue 29)
        assert any("OSC 52" in str(n.title) for n in app._notifications)

    drive(app, body)


def test_export_writes_markdown_and_html_with_the_findings(run_copy: Path) -> None:
    app = recorded_app(load_run(run_copy))
    title = app.state.findings[0].title

    async def body(pilot: Any) -> None:
        await pilot.press("e")
        await pilot.pause()

    drive(app, body)
    md = (run_copy / "report.md").read_text(encoding="utf-8")
    page = (run_copy / "report.html").read_text(encoding="utf-8")
    assert title in md
    assert html.escape(title) in page or title in page


def test_help_screen_lists_the_keys(recorded: Path) -> None:
    app = recorded_app(load_run(recorded))

    async def body(pilot: Any) -> None:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = app.screen.query_one("#help-text").source
        for binding in app.BINDINGS:
            if binding.show:
                assert f"`{binding.key_display or binding.key}`".replace("question_mark", "?") in text.replace("`1` … `9`", "`1-9`")
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)

    drive(app, body)


def test_ops_table_sorts_by_key_and_by_header_click(recorded: Path) -> None:
    app = recorded_app(load_run(recorded))

    async def body(pilot: Any) -> None:
        await pilot.press("3")
        table = app.query_one("#ops-table")
        await pilot.pause()
        assert table.row_count > 0, "op accounting sampled no step"
        await pilot.press("o")  # next column: op
        ops = [str(c) for c in table.get_column("1")]
        assert ops == sorted(ops) and len(set(ops)) > 1
        # click the "calls/step" header: sorted by calls per step, most first
        x = sum(table.columns[str(i)].get_render_width(table) for i in range(2)) + 2
        await pilot.click("#ops-table", offset=(x, 0))
        calls = [float(str(c) or 0) for c in table.get_column("2")]
        assert calls == sorted(calls, reverse=True)

    drive(app, body)


def test_command_palette_offers_the_actions(run_copy: Path) -> None:
    app = recorded_app(load_run(run_copy))

    async def body(pilot: Any) -> None:
        commands = {c.title: c for c in app.get_system_commands(app.screen)}
        for title in ("Export report", "Copy fix", "Help", "Panel: Memory"):
            assert title in commands
        assert "Stop the script" not in commands  # nothing runs
        commands["Panel: Memory"].callback()
        await pilot.pause()
        assert app.query_one("#panels").active == "memory"

    drive(app, body)


def test_cut_recording_says_so(recorded: Path, tmp_path: Path) -> None:
    lines = (recorded / "events.jsonl").read_bytes().splitlines(keepends=True)
    cut = tmp_path / "run"
    cut.mkdir()
    (cut / "events.jsonl").write_bytes(b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    loaded = load_run(cut)
    assert loaded.notes
    app = recorded_app(loaded)

    async def body(pilot: Any) -> None:
        assert "incomplete" in header_text(app, "#hdr-status")
        assert any(loaded.notes in str(n.message) for n in app._notifications)
        await pilot.press("7")
        assert loaded.notes in plain(app.query_one("#env-run"))
        await pilot.press("6")
        assert "no output recorded" in plain(app.query_one("#log-path"))

    drive(app, body)


def test_terminal_hangup_closes_a_finished_run(recorded: Path) -> None:
    app = recorded_app(load_run(recorded))

    async def body(pilot: Any) -> None:
        assert signal.SIGHUP in app._signals  # installed on the app's own event loop
        os.kill(os.getpid(), signal.SIGHUP)
        deadline = time.monotonic() + 10
        while app.is_running and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert not app.is_running

    drive(app, body)


def test_an_exit_status_without_an_exception_is_shown_as_the_scripts_own_exit(recorded: Path, tmp_path: Path) -> None:
    """Status 3 and no uncaught exception recorded: the script's own ``sys.exit(3)``, not a
    crash (session/exit_words.py)."""
    text = (recorded / "events.jsonl").read_text(encoding="utf-8").splitlines()
    exit_line = json.loads(text[-1])
    assert exit_line["k"] == "exit"
    exit_line["returncode"] = 3
    crashed = tmp_path / "run"
    crashed.mkdir()
    (crashed / "events.jsonl").write_text("\n".join([*text[:-1], json.dumps(exit_line)]) + "\n", encoding="utf-8")
    app = recorded_app(load_run(crashed))

    async def body(pilot: Any) -> None:
        assert "exited (status 3)" in header_text(app, "#hdr-status")

    drive(app, body)


# -- distributed runs ------------------------------------------------------------------------
def straggler_of(app: MpsprofApp) -> int:
    facts = next(f.facts for f in app.state.findings if f.rule == "straggler-rank")
    return facts["straggler_rank"]


def test_rank_key_switches_the_header_and_the_data_panel() -> None:
    loaded = load_run(DDP_RECORDING)
    app = recorded_app(loaded)
    job = loaded.session
    assert sorted(job.ranks) == [0, 1]
    wait = {r: fmt_pct(job.ranks[r].steps.data_wait_share()) for r in (0, 1)}
    assert wait[0] != wait[1], "the recording should have one rank waiting for data"

    async def body(pilot: Any) -> None:
        await pilot.press("5")
        assert "job (rank 0)" in header_text(app, "#hdr-rank")
        assert wait[0] in header_text(app, "#hdr-wait") and wait[0] in plain(app.query_one("#data-share"))
        await pilot.press("r")
        await pilot.pause()
        assert app.state.rank == 1 and "rank 1/2" in header_text(app, "#hdr-rank")
        assert wait[1] in header_text(app, "#hdr-wait") and wait[1] in plain(app.query_one("#data-share"))
        # the steps table is rank 1's: its newest step waited as long as rank 1's did
        last = job.ranks[1].steps.series.points()[-1]
        table = app.query_one("#data-steps")
        assert str(table.get_row_at(0)[2]) == f"{last.wait * 1e3:.1f}"
        await pilot.press("4")  # every per-run panel follows the pick
        chart = app.query_one("#mem-chart")  # drawn from rank 1's session (keyed by its samples)
        assert chart.key == (*app.state.view_key[:2], app.state.session.memory.samples)
        await pilot.press("R")
        await pilot.pause()
        assert app.state.rank is None and wait[0] in header_text(app, "#hdr-wait")
        # the command palette offers each rank by name
        commands = {c.title: c for c in app.get_system_commands(app.screen)}
        assert {"Rank: job (rank 0)", "Rank: 1", "Panel: Ranks"} <= set(commands)
        commands["Rank: 1"].callback()
        await pilot.pause()
        assert "rank 1/2" in header_text(app, "#hdr-rank")
        await pilot.click("#hdr-rank")  # the badge cycles too: back to the job
        assert app.state.rank is None

    drive(app, body)


def test_ranks_panel_lists_both_ranks_and_marks_the_straggler() -> None:
    app = recorded_app(load_run(DDP_RECORDING))
    slow = straggler_of(app)
    assert slow == 1  # ddp_straggler.py makes rank 1's dataset slow

    async def body(pilot: Any) -> None:
        await pilot.press("9")
        assert app.query_one("#panels").active == "ranks"
        table = app.query_one("#ranks-table")
        await pilot.pause()
        rows = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        assert [row[1].split()[0] for row in rows] == ["0", "1"]
        assert ["◀" in row[1] for row in rows] == [False, True]
        assert rows[0][0] == "▶"  # the job view shows rank 0
        assert f"rank {slow} holds the job back" in plain(app.query_one("#ranks-summary"))
        split = app.query_one("#ranks-split")
        assert [r for r, _w, _rest in split.rows] == [0, 1] and split.straggler == slow
        assert split.rows[1][1] > split.rows[0][1]  # the straggler waits longer for data
        await pilot.press("down", "enter")  # show rank 1 in every panel
        await pilot.pause()
        assert app.state.rank == 1 and "rank 1/2" in header_text(app, "#hdr-rank")
        assert str(table.get_row_at(1)[0]) == "▶"

    drive(app, body)


def test_rank_state_cycles_through_the_job_and_every_other_rank() -> None:
    job = Session()
    state = RunState(job, live=True, expected_ranks=3)
    assert state.distributed and state.rank_label() == "job (rank 0) · 3 ranks"
    for rank in (0, 2, 1):
        job.ranks[rank] = Session()
    assert state.rank_choices == [None, 1, 2]
    assert [state.step_rank(1) for _ in range(3)] == [1, 2, None]
    assert state.step_rank(-1) == 2 and state.session is job.ranks[2] and state.rank_label() == "rank 2/3"
    assert state.select_rank(0) and state.session is job
    assert not state.select_rank(7) and state.session is job
    # a crash of rank 2 shows in the job view too, and the Warnings panel names the rank
    job.feed(Event(KIND_EXCEPTION, 1.5, {"type": "RuntimeError", "message": "boom", "frames": [], "r": 2}))
    assert job.crash is not None and crash_rank(state) == 2
    state.select_rank(1)
    assert crash_rank(state) is None  # rank 1 did not crash


# -- live runs -----------------------------------------------------------------------------
def live_app(tmp_path: Path, steps: int = 400) -> MpsprofApp:
    spec = RunSpec(
        target=str(REPO / "examples" / "tqdm_like.py"),
        args=["--epochs", "50", "--steps", str(steps), "--delay", "0.01"],
        run_dir=tmp_path / "run", capture_output=True,
    )
    spec.run_dir.mkdir()
    return MpsprofApp(Session(), [], spec=spec, run_dir=spec.run_dir)


@pytest.mark.slow
def test_live_run_stop_key(tmp_path: Path) -> None:
    app = live_app(tmp_path)

    async def body(pilot: Any) -> None:
        await wait_for(pilot, lambda: app.session.steps.count >= 30)
        assert "running" in header_text(app, "#hdr-status")
        await wait_for(pilot, lambda: "epoch 0:" in "".join(app.query_one(LogPanel).output.buffer.plain_lines()))
        await pilot.press("s")
        assert app.state.stopping  # "stopping…" until the script has ended
        await wait_for(pilot, lambda: app.results is not None, timeout=30)
        assert app.state.status == "stopped"
        assert "stopped" in header_text(app, "#hdr-status")
        assert app.is_running  # stays open on the final findings
        await pilot.press("s")  # after the end: a note, not silence
        assert "already stopped" in str(list(app._notifications)[-1].message)
        await wait_for(pilot, lambda: "KeyboardInterrupt" in "\n".join(app.query_one(LogPanel).output.buffer.plain_lines()), 10)
        lines = app.query_one(LogPanel).output.buffer.plain_lines()
        # the \r progress bar of epoch 0 is one line, as a terminal shows it
        assert sum(1 for line in lines if line.startswith("epoch 0:")) == 1

    drive(app, body)
    assert app.returncode is not None and app.returncode != 0
    output = (tmp_path / "run" / "output.log").read_text(encoding="utf-8", errors="replace")
    assert "KeyboardInterrupt" in output
    summary = read_summary(tmp_path / "run")
    assert summary["status"] == "stopped" and summary["exit"]["stopped_by_user"] is True


@pytest.mark.slow
def test_live_quit_asks_then_stops_the_script(tmp_path: Path) -> None:
    app = live_app(tmp_path)

    async def body(pilot: Any) -> None:
        await wait_for(pilot, lambda: app.session.steps.count >= 5)
        await pilot.press("q")
        assert isinstance(app.screen, ConfirmQuitScreen)
        await pilot.press("n")
        assert not isinstance(app.screen, ConfirmQuitScreen)
        assert app.state.running and app.controller.poll() is None
        await pilot.press("q")
        await pilot.press("y")
        deadline = time.monotonic() + 30
        while app.is_running and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert not app.is_running

    drive(app, body)
    assert app.ended.is_set()
    assert app.session.status == "stopped"
    assert "KeyboardInterrupt" in (tmp_path / "run" / "output.log").read_text(encoding="utf-8", errors="replace")


@pytest.mark.slow
def test_live_torchrun_ranks_and_stop_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two gloo ranks under the live app: the Ranks tab is there from the start, ``r``
    switches rank while they run, and ``s`` stops every rank (through torchrun)."""
    import psutil

    from mpsprofiler.launcher.distributed import plan_from_options

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("STEPS", "3000")  # far longer than the test: it has to be stopped
    script = str(REPO / "tests" / "scripts_dist" / "ddp_straggler.py")
    spec = RunSpec(target=script, args=[], run_dir=tmp_path / "run", capture_output=True,
                   torchrun=plan_from_options("2", [], script, False, []))
    spec.run_dir.mkdir()
    app = MpsprofApp(Session(), [], spec=spec, run_dir=spec.run_dir)
    pids: list[int] = []

    async def body(pilot: Any) -> None:
        assert app.query_one("#panels").get_tab("ranks").display  # announced by torchrun's options
        await wait_for(pilot, lambda: len(app.session.ranks) == 2
                       and all(s.steps.count >= 5 for s in app.session.ranks.values()))
        pids.extend(int(s.hello["pid"]) for s in app.session.ranks.values())
        await pilot.press("9")
        await wait_for(pilot, lambda: app.query_one("#ranks-table").row_count == 2, timeout=10)
        await pilot.press("r")
        assert "rank 1/2" in header_text(app, "#hdr-rank") and "running" in header_text(app, "#hdr-status")
        await pilot.press("s")
        await wait_for(pilot, lambda: app.results is not None, timeout=40)
        assert app.state.status == "stopped"

    drive(app, body)
    assert len(pids) == 2
    for pid in pids:
        try:
            alive = psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            alive = False
        assert not alive, f"rank process {pid} outlived the stop"
    summary = read_summary(tmp_path / "run")
    assert summary["status"] == "stopped" and [r["rank"] for r in summary["ranks"]] == [0, 1]


# -- pieces ----------------------------------------------------------------------------------
def test_terminal_buffer_applies_carriage_returns_and_stays_bounded() -> None:
    buf = TerminalBuffer(max_lines=3)
    buf.write("start\n 10%|#   |\r 20%|##  |")
    assert buf.plain_lines() == ["start", " 20%|##  |"]
    buf.write("\rdone\n")
    assert buf.plain_lines() == ["start", "done|##  |"]  # a terminal overwrites, it does not clear
    buf.write("\x1b[31mred\x1b[0m\x1b[2K\tx\n" + "".join(f"line {i}\n" for i in range(10)))
    assert len(buf) == 3 and buf.plain_lines()[-1] == "line 9"
    assert buf.first_number == buf.committed - 3


def test_markdown_keeps_angle_brackets_of_prose_but_not_of_code() -> None:
    text = "at train.py:3 in <module>: `a<b`\n```python\nif a<b:\n    pass\n```"
    assert escape_tags(text) == "at train.py:3 in \\<module\\>: `a<b`\n```python\nif a<b:\n    pass\n```"


def test_inbox_asks_for_one_message_until_drained() -> None:
    inbox: EventInbox[int] = EventInbox()
    assert inbox.put([1, 2]) is True
    assert inbox.put([3]) is False
    assert inbox.drain() == [1, 2, 3]
    assert inbox.put([4]) is True


def test_recent_rate() -> None:
    points = [StepPoint(i, 10.0 + i * 0.5, 0.5, 0.1, 1, None, None) for i in range(100)]
    assert recent_rate(points, window=10.0) == pytest.approx(2.0)
    assert recent_rate(points[:1]) is None


def test_every_panel_has_its_key_tab_and_help_from_the_registry() -> None:
    """Keys, tab labels and the help screen come from tui/panels.py: a new panel needs no other list."""
    from mpsprofiler.tui.panels import NUMBER_KEYS, PANELS, help_keys_row
    from mpsprofiler.tui.screens.help import HELP

    actions = {b.key: b.action for b in MpsprofApp.BINDINGS}
    for i, panel in enumerate(PANELS):
        assert PANEL_KEYS[panel.id] == NUMBER_KEYS[i]
        assert actions[NUMBER_KEYS[i]] == f"panel('{panel.id}')"
        assert panel.label in help_keys_row()
    assert help_keys_row() in HELP and all(p.help in HELP for p in PANELS)
