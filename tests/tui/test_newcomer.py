"""A new user's first hour (issue 29): what they type lands where they meant, or is refused
with the order that works; what the views say reads right."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from helpers import drive_recorded
from mpsprofiler import cli
from torch_facts import has_mps_kernel

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "recordings" / "slow_dataloader"


def parse(argv: list[str]):  # type: ignore[no-untyped-def]
    return cli._parse(cli.build_parser(), argv)


def test_torch_facts_read_the_installed_torch() -> None:
    """The helper the readiness tests take their expectations from can say both yes and no."""
    assert has_mps_kernel("mm.out") and not has_mps_kernel("_pdist_forward")


def test_try_options_after_a_run_directory_are_parsed() -> None:
    """`mpsprof try RUN --budget 40 --pairs 3 --steps 20` ran 5 pairs x 30 steps: the
    options after the run directory were taken as script arguments and ignored."""
    args = parse(["try", str(FIXTURE), "--budget", "40", "--pairs", "3", "--steps", "20", "--set", "env.X=1"])
    assert (args.budget, args.pairs, args.steps, args.args) == (40.0, 3, 20, [])
    assert args.settings == ["env.X=1"] and args.target == str(FIXTURE)
    mixed = parse(["try", "--steps", "4", "--set", "env.A=1", str(FIXTURE), "--set", "env.B=2"])
    assert mixed.steps == 4 and mixed.settings == ["env.A=1", "env.B=2"]


@pytest.mark.parametrize("tail", [["--pairs", "3", "foo"], ["--", "--pairs", "3"]])
def test_try_refuses_words_after_a_run_directory(tail: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse(["try", str(FIXTURE), *tail])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "takes no script arguments" in err and f"mpsprof try {FIXTURE} --steps 20" in err, err


def test_try_and_run_say_where_an_mpsprof_option_after_the_script_went(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "train.py"
    script.write_text("pass\n")
    args = parse(["try", "--set", "env.A=1", str(script), "--steps", "3"])
    assert args.args == ["--steps", "3"] and args.steps == 30  # the script's, as python would
    err = capsys.readouterr().err
    assert f"--steps after {script} goes to the script" in err and f"mpsprof try --steps ... {script}" in err
    args = parse(["run", str(script), "--max-steps", "5", "--epochs", "1"])
    assert args.args == ["--max-steps", "5", "--epochs", "1"] and args.max_steps is None
    assert f"mpsprof run --max-steps ... {script}" in args.note  # printed after the run's summary
    assert parse(["run", str(script), "--epochs", "1"]).note == ""  # the script's own options


def test_try_help_says_where_options_go(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(["try", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "with a run directory, anywhere" in out and "mpsprof try mpsprof-runs/<run> --steps 20" in out


@pytest.mark.parametrize(("word", "hint"), [("rnu", "did you mean run?"), ("veiw", "did you mean view?"),
                                            ("train.py", "mpsprof run train.py --lr 1")])
def test_a_mistyped_command_gets_a_suggestion(word: str, hint: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse([word, "--lr", "1"])
    assert exc.value.code == 2 and hint in capsys.readouterr().err


def test_view_and_report_find_the_runs_of_a_project_directory(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    import os

    runs = tmp_path / "mytrain" / "mpsprof-runs"
    old, new = runs / "20260101-old", runs / "20260102-new"
    shutil.copytree(FIXTURE, old)
    shutil.copytree(FIXTURE, new)
    os.utime(old / "events.jsonl", (1, 1))
    assert cli.main(["report", str(tmp_path / "mytrain"), "--format", "json", "-o", str(tmp_path / "r.json")]) == 0
    err = capsys.readouterr().err
    assert f"holds 2 runs: opening the newest, {new}" in err and f"    {old}" in err, err
    from mpsprofiler.cli_args import find_runs

    assert find_runs([runs]) == [new] and find_runs([new]) == [new]
    assert find_runs([tmp_path]) == [tmp_path]  # nothing there: load says what is wrong


# -- item 2: a script that dies before its first step; a stop is no crash ------------------
BROKEN = {
    "syntax": (b"import os\nx = (\n", "SyntaxError: '(' was never closed (broken.py, line 2) at {script}:2"),
    "import": (b"import os\nimport no_such_module_29\n", "ModuleNotFoundError: No module named 'no_such_module_29' at {script}:2"),
    "missing-file": (b"open('no-such-file.txt')\n", "FileNotFoundError: [Errno 2] No such file or directory: 'no-such-file.txt' at {script}:1"),
}


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_a_script_that_dies_before_its_first_step_is_a_crash_finding(kind: str, tmp_path: Path) -> None:
    """The TUI said 'crashed (exit 1)' over 'waiting for the first steps…' and 'No problems
    found'; now the Overview and Findings show the crash line headless prints."""
    import asyncio

    from mpsprofiler.launcher.child import RunSpec
    from mpsprofiler.report.console import render_console
    from mpsprofiler.session.session import Session
    from mpsprofiler.tui.app import MpsprofApp
    from mpsprofiler.tui.widgets.findings import FindingsPanel
    from tests.tui.test_tui import wait_for

    source, expected = BROKEN[kind]
    script = tmp_path / "broken.py"
    script.write_bytes(source)
    line = expected.format(script=script)
    spec = RunSpec(target=str(script), args=[], run_dir=tmp_path / "run", capture_output=True, cwd=tmp_path)
    spec.run_dir.mkdir()
    app = MpsprofApp(Session(), [], spec=spec, run_dir=spec.run_dir)
    app.animation_level = "none"

    async def main() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: app.results is not None, timeout=60)
            await pilot.pause(0.2)
            top = app.state.findings[0]
            assert top.rule == "crash" and top.severity == "critical"
            assert line in top.title and line in top.evidence.replace("\\", "")
            listed = " ".join(str(app.query_one("#ov-findings").get_option_at_index(0).prompt).split())
            assert line in listed, listed
            assert "crashed before its first step" in app.query_one("#ov-step").empty
            assert not app.query_one("#ov-findings-empty").display  # no "No problems found"
            await pilot.press("2")
            await pilot.pause(0.2)
            assert app.query_one(FindingsPanel).selected is top
            shown = " ".join(app.query_one("#fd-markdown").source.replace("\\", "").split())
            assert line in shown and "Fix the" in shown, shown
            from mpsprofiler.tui.panels import PANEL_KEYS  # the keys the diagnosis's text names

            assert f"keys {PANEL_KEYS['log']} and {PANEL_KEYS['warnings']}" in shown, shown

    asyncio.run(main())
    assert app.results is not None
    summary = render_console(app.results.summary, app.results.findings)
    assert f"crash       {line}" in summary  # the very line headless prints
    # and the console counts the findings as the TUI does: the crash is one, not "none"
    assert "findings    none" not in summary
    assert f"findings ({len(app.state.findings)}):" in summary
    assert f"[CRIT] {app.state.findings[0].title}  (crash)" in summary


def test_a_stop_by_the_user_is_stopped_at_step_n_not_a_crash() -> None:
    from mpsprofiler.diagnosis.crash_finding import crash_finding
    from mpsprofiler.events import KIND_EXCEPTION, KIND_EXIT, KIND_STEPS, Event
    from mpsprofiler.report.console import render_console
    from mpsprofiler.session.session import Session
    from mpsprofiler.session.summary import summarize
    from mpsprofiler.tui.state import RunState

    def ended(returncode: int, signal_name: str | None, stopped: bool) -> Session:
        s = Session()
        s.feed(Event(KIND_STEPS, 0.8, {"mode": "optimizer", "i": list(range(1, 8)),
                                       "end": [i * 0.1 for i in range(1, 8)], "dur": [0.1] * 7, "wait": [0.0] * 7,
                                       "batches": [1] * 7, "idle": [None] * 7, "alloc": [None] * 7}))
        s.feed(Event(KIND_EXCEPTION, 1.0, {"type": "KeyboardInterrupt", "message": "", "frames": [
            {"file": "/x/train.py", "line": 4, "func": "<module>", "user": True}]}))
        s.feed(Event(KIND_EXIT, 1.1, {"returncode": returncode, "signal": 2 if signal_name else None,
                                      "signal_name": signal_name, "duration": 1.1, "stopped_by_user": stopped}))
        return s

    for session in (ended(-2, "SIGINT", True), ended(-2, "SIGINT", False), ended(1, None, True)):  # s/q, Ctrl-C
        assert session.status == "stopped"
        assert RunState(session, live=False).status_text() == f"stopped at step {session.steps.count}"
        assert crash_finding(session, []) is None
        text = render_console(summarize(session), [])
        assert "stopped     at step" in text and "crash " not in text and "KeyboardInterrupt" not in text, text
    caught = ended(1, None, False)  # a KeyboardInterrupt the script raised and exited 1 on: a crash
    assert caught.status == "crashed" and crash_finding(caught, []) is not None


# -- item 3: the keyboard reaches everything at 80x24 ----------------------------------------
def small_app(keys_and_checks, size=(80, 24), run: Path = FIXTURE):  # type: ignore[no-untyped-def]
    drive_recorded(keys_and_checks, size, run)


@pytest.mark.slow
def test_the_findings_detail_scrolls_to_its_fix_with_the_keyboard() -> None:
    from mpsprofiler.tui.widgets.findings import FindingsPanel

    async def body(app, pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.press("2")
        await pilot.pause(0.2)
        detail = app.query_one("#fd-detail")
        panel = app.query_one(FindingsPanel)
        first = panel.selected
        assert detail.max_scroll_y > 0 and detail.scroll_y == 0  # the Fix is below the fold at 80x24
        await pilot.press("pagedown")
        assert 0 < detail.scroll_y
        await pilot.press("end")
        assert detail.scroll_y == detail.max_scroll_y
        fix = next(h for h in detail.query("MarkdownH2") if "Fix" in str(h.content))
        assert fix.region.y < detail.region.bottom or detail.scroll_y == detail.max_scroll_y
        await pilot.press("home")
        assert detail.scroll_y == 0
        await pilot.press("j", "j")
        assert detail.scroll_y == 2
        await pilot.press("k")
        assert detail.scroll_y == 1
        await pilot.press("down")  # the list keeps the arrows: the next finding
        assert panel.selected is not first
        await pilot.press("up", "right")  # into the detail: now the arrows scroll it
        assert app.focused is detail
        before = detail.scroll_y
        await pilot.press("down", "down")
        assert detail.scroll_y > before and panel.selected is first
        await pilot.press("left")
        assert app.focused is panel.findings_list

    small_app(body)


@pytest.mark.slow
def test_every_scrollable_panel_scrolls_with_the_keyboard_and_help_says_so() -> None:
    from mpsprofiler.tui.panels import PANELS, SCROLL_TARGET
    from mpsprofiler.tui.screens.help import HELP

    assert "`pgdn` `pgup` `home` `end`" in HELP and "`j` `k`" in HELP
    async def body(app, pilot) -> None:  # type: ignore[no-untyped-def]
        for pid in ("log", "environment", "warnings", "ops", "data"):
            await pilot.press(next(k for p, k in zip(PANELS, "123456789", strict=False) if p.id == pid))
            await pilot.pause(0.2)
            pane = app.query_one(f"#panel-{pid}").query(SCROLL_TARGET[pid]).first()
            if pane.max_scroll_y == 0:
                continue  # all of it fits
            await pilot.press("end")
            assert pane.scroll_y == pane.max_scroll_y, pid
            await pilot.press("home")
            assert pane.scroll_y == 0, pid

    small_app(body)


def test_tab_labels_fit_80_columns_uncut() -> None:
    from mpsprofiler.tui.panels import PANEL_IDS, PANELS, TAB_PADDING, tab_labels

    for shown in (list(PANEL_IDS[:-1]), list(PANEL_IDS)):  # with and without the Ranks tab
        labels = tab_labels(80, shown, {"findings": 12})
        assert sum(len(t) + TAB_PADDING for t in labels.values()) <= 80, labels
        names = {p.id: {p.label, p.short, p.tiny} for p in PANELS}
        assert all(t.split(" ")[1] in names[pid] for pid, t in labels.items()), labels
    wide = tab_labels(200, list(PANEL_IDS), {"findings": 2})
    assert wide["environment"] == "7 Environment" and wide["findings"] == "2 Findings (2)"

    async def body(app, pilot) -> None:  # type: ignore[no-untyped-def]
        bar = " ".join(str(t.label) for t in app.query("Tab"))
        assert "8 Warn" in bar and "7 Env" in bar and "1 Overview" in bar

    small_app(body)


def test_ops_columns_shrink_by_priority() -> None:
    from mpsprofiler.tui.widgets.ops import OP_MIN, OpLine, column_widths

    lines = [OpLine("sync on Mac", ".item() → aten::_local_scalar_dense", "CrossEntropyLoss", "x.py", 1, 1.0, None, "")]
    op, module, narrow = column_widths(74, lines)
    assert module == len("CrossEntropyLoss") and op >= OP_MIN and narrow  # the module whole, aten:: dropped
    assert column_widths(60, lines)[:2] == (OP_MIN, len("module"))  # very narrow: the op keeps its minimum
    assert column_widths(200, lines) == (28, len("CrossEntropyLoss"), False)  # wide: nothing cut


def test_the_try_pane_leaves_the_finding_its_width_at_80_columns() -> None:
    async def body(app, pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.press("2")
        panel = app._experiment_panel()
        panel.start("Trying dataloader.num_workers=1", "5 pairs of runs")
        for i in range(4):
            panel.add_line(f"pair {i + 1}: 53.1 ms -> 21.0 ms")
        await pilot.pause(0.3)
        detail = app.query_one("#fd-detail")
        assert detail.region.width >= 40, detail.region  # was 2 columns beside a 50-column pane
        assert panel.region.width == 80 and panel.region.height >= 6
        assert app.query_one("Footer").region.y > panel.region.y  # the keys stay visible

    small_app(body)


# -- item 4: one doctor -----------------------------------------------------------------------
def test_the_environment_panel_gives_doctors_verdicts() -> None:
    """The panel judged the probe's environment without the facts doctor adds (NumPy, the
    NVIDIA driver): 'warn CUDA ... check nvidia-smi' and 'NumPy: Not checked' beside a
    doctor that said there is no driver. Same machine, same interpreter: same verdicts."""
    from mpsprofiler import doctor
    from mpsprofiler.environment import collect_environment, pytorch_env
    from mpsprofiler.events import KIND_ENV, Event
    from mpsprofiler.session.session import Session
    from mpsprofiler.tui.state import RunState
    from mpsprofiler.tui.widgets.environment import doctor_env

    env = dict(collect_environment())  # what the probe records in the script's process
    env["pytorch_env"] = pytorch_env()
    session = Session()
    session.feed(Event(KIND_ENV, 0.1, env))
    live = RunState(session, live=True)
    panel = {c.id: (c.status, c.detail) for c in doctor.run_checks(doctor_env(session.env, live))}
    cli = {c.id: (c.status, c.detail) for c in doctor.run_checks(doctor.collect_for_doctor())}
    assert panel.keys() == cli.keys()
    for name in ("numpy", "cuda", "python", "torch", "mps", "mps_fallback"):
        assert panel[name] == cli[name], name
    assert "Not checked" not in panel["numpy"][1]
    other = dict(env, python_executable="/elsewhere/bin/python")  # another machine's recording
    session2 = Session()
    session2.feed(Event(KIND_ENV, 0.1, other))
    assert "numpy" not in doctor_env(session2.env, RunState(session2, live=False))


# -- item 5: wording ------------------------------------------------------------------------------
def test_plural_agree_and_ordinal() -> None:
    from mpsprofiler.units import agree, ordinal, plural

    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111, 131)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st", "111th", "131st"]
    assert plural(1, "run") == "1 run" and plural(3, "run") == "3 runs" and plural(2, "batch", "batches") == "2 batches"
    assert agree(1, "keeps", "keep") == "keeps" and agree(4, "keeps", "keep") == "keep"


def test_try_result_and_ops_panel_read_as_english() -> None:
    from mpsprofiler.experiment.command import render_result
    from mpsprofiler.session.session import Session
    from mpsprofiler.tui.state import RunState
    from mpsprofiler.tui.widgets.ops import op_lines, summary_text

    text = render_result({"label": "x", "headline": "h", "a_median_s": [0.05], "b_median_s": [0.02], "steps": 1})
    assert "(median of 1 run x 1 step)" in text
    ops = {"sampled_steps": 3, "first_step": 3, "last_step": 400, "interval": 131, "overhead_share": 0.993,
           "syncs": [{"kind": "item", "op": "aten::_local_scalar_dense", "predicted": True, "calls_per_step": 1}]}
    summary = summary_text(ops, RunState(Session(), live=False)).plain
    assert "every 131st step" in summary and "sampling cost" not in summary
    assert "op accounting took 99.3% of their time" in summary
    line = op_lines(ops)[0]
    assert line.kind == "sync on Mac" and line.op == ".item() → aten::_local_scalar_dense"


def test_one_worker_keeps_up() -> None:
    """The sentence agrees with its number ("1 worker keeps up", "4 workers keep up"), as
    the rule file words it (the analyzer gives codes and numbers)."""
    from tests.unit.test_reason_texts import _advise, _fig, reason_text

    one = reason_text(_advise("waiting", _fig(5, 20, cpu_ms=0.5)))
    four = reason_text(_advise("waiting", _fig(30, 40, cpu_ms=0.5)))
    assert "so 1 worker keeps up (" in one, one
    assert "so 4 workers keep up (" in four, four


# -- item 6: the README warns before the command that downloads 5 GB --------------------------
def test_readme_warns_about_the_cuda_download_before_the_quick_start_commands() -> None:
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    quick = text[text.index("## Quick start"):text.index("## Use")]
    install = quick.index("pip install -e . && mpsprof demo")
    assert quick.index("about 5 GB") < install and quick.index("download.pytorch.org/whl/cpu") < install
    assert "pip install -e '.[test]' && OMP_NUM_THREADS=1 python -m pytest -q -m \"not slow\" -n 2" in quick
