"""A new user's first hour (issue 29), the smaller items: per-step compare, a cut recording's
title, the copied fix, the exit summary's `t` verdict, and home paths kept out of reports."""

from __future__ import annotations

import json
from pathlib import Path

from mpsprofiler.report import render_report
from mpsprofiler.results import build_results
from mpsprofiler.session.recording import load_runs

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "recordings" / "slow_dataloader"


def _events() -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in (FIXTURE / "events.jsonl").read_text().splitlines() if line.strip()]


def _write(run_dir: Path, evs: list[dict]) -> Path:  # type: ignore[type-arg]
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evs))
    return run_dir


def _report(run_dir: Path, fmt: str) -> str:
    loaded = load_runs([run_dir])
    return render_report(fmt, loaded.session, build_results(loaded.session, []))


def test_a_recording_without_exit_is_not_titled_running(tmp_path: Path) -> None:
    """A recording read back whose events end without an exit (the launcher died) was titled
    "running"; it says how it ended, with its step count, in both reports."""
    evs = [e for e in _events() if e["k"] != "exit"]
    run = _write(tmp_path / "cut", evs)
    md, html = _report(run, "md"), _report(run, "html")
    first = md.splitlines()[0]
    assert "running" not in first and "ended without an exit record after" in first, first
    h1 = html.split("<h1>")[1].split("</h1>")[0]
    assert "running" not in h1 and "ended without an exit record" in h1, h1
    assert "<title>" in html and "running" not in html.split("<title>")[1].split("</title>")[0]
    # with a cut event (--max-steps) the title says where it was cut
    cut = _write(tmp_path / "cut2", evs + [{"k": "cut", "ts": evs[-1]["ts"], "steps": 15, "reason": "max_steps"}])
    assert "cut after 15 steps" in _report(cut, "md").splitlines()[0]
    # the complete recording keeps its status; compare's status row says the same
    assert "finished" in _report(FIXTURE, "md").splitlines()[0]
    from mpsprofiler.compare import load_summary

    assert load_summary(run)["status"].startswith("ended without an exit record")
    assert load_summary(FIXTURE)["status"] == "finished"


def test_compare_of_runs_of_different_length_compares_per_step() -> None:
    """`compare` said "19.63x faster" about the total time of a 64-step and a 15-step run:
    the totals get no faster/slower then, per-step figures do, and the view says why."""
    import copy

    from mpsprofiler.compare import length_note, load_summary, render_markdown, render_text, rows

    a = load_summary(FIXTURE)
    b = copy.deepcopy(a)
    b["steps"].update(count=15, training_s=a["steps"]["training_s"] / 4 * 0.5)  # a quarter of the steps, 2x faster each
    b["duration_s"] = a["duration_s"] / 8
    table = {r.label: r for r in rows(a, b)}
    note = length_note(a, b)
    assert note == "Runs of different length: 60 and 15 steps; per-step figures compared."
    assert "faster" not in table["training time (total)"].ratio and "faster" not in table["run time (total)"].ratio
    per_step = table["training time / step"].ratio
    assert "(2.00x faster)" in per_step, per_step
    assert "data wait / step" in table and "median step" in table
    assert note in render_text("A", "B", list(table.values()), note)
    assert note in render_markdown("A", "B", list(table.values()), note)
    # same length: no note, totals keep their "faster"
    same = {r.label: r for r in rows(a, a)}
    assert length_note(a, a) == "" and "training time" in same and "training time (total)" not in same


def test_reports_show_paths_relative_or_with_tilde(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """The Markdown and HTML reports held absolute home-directory paths (pasted into a public
    issue, they name the user): relative to the working directory, ~ for home, and
    `--absolute-paths` keeps them; summary.json-style JSON is untouched."""
    from mpsprofiler import cli
    from mpsprofiler.report.paths import display_paths

    home = tmp_path / "home" / "jane"
    work = home / "proj"
    work.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    evs = _events()
    run = evs[0]
    run.update(script=f"{work}/train.py", argv=[f"{work}/train.py"], cwd=str(work), run_dir=f"{work}/mpsprof-runs/r1")
    for e in evs:
        if e["k"] == "env" and "python" in e:
            e["python"] = f"{home}/venv/bin/python"
    rec = _write(tmp_path / "rec", evs)
    for fmt in ("md", "html"):
        text = _report(rec, fmt)
        assert str(home) not in text, fmt
        assert "train.py" in text and "~/venv/bin/python" in text.replace("\\~", "~"), fmt
    assert str(home) in _report(rec, "json")
    cli.main(["report", str(rec), "--absolute-paths"])
    assert f"{work}/train.py" in capsys.readouterr().out
    cli.main(["report", str(rec)])
    assert str(home) not in capsys.readouterr().out
    # boundaries: a longer name is not the home directory, the directory itself is "."
    assert display_paths("/h/jane2/x /h/jane/x /h/jane", cwd="/w", home="/h/jane") == "/h/jane2/x ~/x ~"
    assert display_paths("in /w, see /w/a.py:3", cwd="/w", home="/h") == "in ., see a.py:3"
    # a fix's code block is the script's own code: its string literals are pasted as they are
    # (shortened, `output_dir="/w/out"` became `output_dir="out"`: the pasted fix wrote elsewhere)
    fix = 'change /w/a.py:3 to:\n\n```python\nargs = Args(output_dir="/w/out", log="/h/x")\n```\nthen /w/a.py'
    assert display_paths(fix, cwd="/w", home="/h") == \
        'change a.py:3 to:\n\n```python\nargs = Args(output_dir="/w/out", log="/h/x")\n```\nthen a.py'
    page = '<p>/w/a.py</p><pre><code class="language-python">d = "/w/out"</code></pre><p>/h/b</p>'
    assert display_paths(page, cwd="/w", home="/h") == \
        '<p>a.py</p><pre><code class="language-python">d = "/w/out"</code></pre><p>~/b</p>'
    # a command line or a traceback is the report's own text: shortened
    assert display_paths("```sh\nmpsprof run /w/t.py\n```", cwd="/w", home="/h") == "```sh\nmpsprof run t.py\n```"


def test_exit_summary_says_what_t_tried(capsys) -> None:  # type: ignore[no-untyped-def]
    """The summary printed on exit (after `q`) left out the `t` verdict the reports show as
    "**Tried:**": it prints the same lines."""
    from mpsprofiler.report.changes import experiment_lines
    from mpsprofiler.report.console import print_summary

    loaded = load_runs([FIXTURE])
    results = build_results(loaded.session, [])
    results.experiments = [{"rule": "dataloader_bound", "headline": "num_workers=4: 2.10x faster (1.9-2.3x)",
                            "a_median_s": [0.05, 0.052], "b_median_s": [0.024, 0.025],
                            "loss": {"equivalent": True}}]
    print_summary(results, None)
    err = capsys.readouterr().err
    line = experiment_lines(results)[0]
    assert f"tried       {line}" in err and "2.10x faster" in line and "loss equivalent" in line
    results.experiments = []
    print_summary(results, None)
    assert "tried" not in capsys.readouterr().err


def test_copy_fix_takes_the_code_and_saves_it(tmp_path: Path) -> None:
    """`c` copied the whole fix, prose included, and said "Copied" though OSC 52 cannot tell:
    the code blocks go to the clipboard and to RUN_DIR/fix-<rule>.txt, the message says "sent"
    and where the file is."""
    import asyncio
    import shutil

    from mpsprofiler.tui.app import recorded_app
    from mpsprofiler.tui.copy_fix import fix_to_copy

    fix = "Use more workers:\n\n```python\nloader = DataLoader(ds, num_workers=4)\n```\n\nThen measure.\n"
    assert fix_to_copy(fix) == "loader = DataLoader(ds, num_workers=4)\n"
    assert fix_to_copy("Only prose here.") == "Only prose here.\n"

    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run)
    app = recorded_app(load_runs([run]))
    notes: list[str] = []
    picked: list[object] = []
    app.notify = lambda message, **kw: notes.append(str(kw.get("title")) + ": " + message)  # type: ignore[method-assign]

    async def main() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("2")  # the Findings panel
            await pilot.pause()
            picked.append(app.selected_finding())
            app.action_copy_fix()
            await pilot.pause()

    asyncio.run(main())
    finding = picked[0]
    assert finding is not None and "```" in finding.fix  # type: ignore[attr-defined]  # the fixture's finding has prose and code
    saved = list(run.glob("fix-*.txt"))
    assert [p.name for p in saved] == [f"fix-{finding.rule}.txt"]
    copied = saved[0].read_text()
    assert app.clipboard == copied and copied.strip() and copied.strip() in finding.fix
    assert copied.strip() != finding.fix.strip() and "```" not in copied
    assert len(notes) == 1 and "Copied" not in notes[0] and "OSC 52" in notes[0] and str(saved[0]) in notes[0]
