"""What the live TUI costs the parent: screen layouts and rebuilds it must not do.

A whole-screen layout costs the parent ~15-20 ms and a Markdown rebuild ~0.1-0.3 s; at
full step rate these, not the figures, decided whether the app stayed under 5% of a core
(benchmarks/tui_cpu.py measures the total). Each test drives the real app (a recorded
run, the real widgets) in Textual's pilot and counts what the screen did.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Label, Markdown, Static

from helpers import child_env, drive_recorded, mpsprof_cli
from mpsprofiler.tui.app import MpsprofApp
from mpsprofiler.tui.widgets.findings import FindingsPanel, patch_markdown
from mpsprofiler.tui.widgets.header import RunHeader, _needs_layout
from mpsprofiler.tui.widgets.log_panel import LogPanel

REPO = Path(__file__).resolve().parents[2]
RECORDING = REPO / "tests" / "fixtures" / "recordings" / "slow_dataloader"
SIZE = (120, 40)


def drive(body: Callable[[MpsprofApp, Any], Awaitable[None]]) -> None:
    drive_recorded(body, SIZE, RECORDING)


class LayoutCounter:
    """Counts the screen's full layouts (Textual's ``Screen._refresh_layout``)."""

    def __init__(self, app: MpsprofApp) -> None:
        screen = app.screen
        self.count = 0
        original = screen._refresh_layout

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return original(*args, **kwargs)

        screen._refresh_layout = counted  # type: ignore[method-assign]


def test_the_overviews_charts_and_figures_repaint_without_copying_their_strips_for_links() -> None:
    """Textual's link styling copies every strip of a widget at each repaint; the
    Overview's charts, figures and latest output hold no links and repaint every second."""
    async def body(app: MpsprofApp, pilot: Any) -> None:
        widgets = [*app.query("OverviewPanel LineChart"), app.query_one("#ov-figures"), app.query_one("#ov-output")]
        assert len(widgets) == 5
        painted: set[int] = set()
        ours = {id(w) for w in widgets}
        link_copies = 0
        rendering: list[int] = []
        render_content = Widget._render_content
        apply_link_style = Strip._apply_link_style

        def counted_render(self: Widget) -> None:
            painted.add(id(self))
            rendering.append(id(self))
            try:
                render_content(self)
            finally:
                rendering.pop()

        def counted_links(self: Strip, style: Any) -> Strip:
            # only these widgets' strips: another widget repainting in the same frames (the
            # header's clock, a tab label on a slow machine) is not what this test is about
            nonlocal link_copies
            if rendering and rendering[-1] in ours:
                link_copies += 1
            return apply_link_style(self, style)

        Widget._render_content = counted_render  # type: ignore[method-assign]
        Strip._apply_link_style = counted_links  # type: ignore[method-assign]
        try:
            for widget in widgets:
                widget.refresh()
            await pilot.pause()
            await pilot.pause()
        finally:
            Widget._render_content = render_content  # type: ignore[method-assign]
            Strip._apply_link_style = apply_link_style  # type: ignore[method-assign]
        assert {id(w) for w in widgets} <= painted  # they did repaint
        assert link_copies == 0

    drive(body)


def _cells(strips: list[Strip]) -> list[list[tuple[Any, ...]]]:
    """(character, colours as RGB, attributes) of every cell: what the terminal shows."""
    def look(style: Any) -> tuple[Any, ...]:
        if style is None:
            return ()
        return (style.color and tuple(style.color.get_truecolor()), style.bgcolor and tuple(style.bgcolor.get_truecolor()),
                style.bold, style.dim, style.italic, style.underline, style.reverse, style.strike)

    return [[(ch, look(seg.style)) for seg in strip for ch in seg.text] for strip in strips]


def test_the_overviews_charts_repaint_as_strips_without_textuals_text_conversion() -> None:
    """A chart is laid out cell by cell already; Textual's path for a Rich Text (convert
    to Content, wrap, align, style each line) cost twice what drawing the chart did. The
    charts hand over strips, and those show exactly what Textual's path would."""
    from textual.content import Content
    from textual.visual import Visual

    from mpsprofiler.tui.widgets.charts import ChartStrips

    async def body(app: MpsprofApp, pilot: Any) -> None:
        charts = list(app.query("OverviewPanel LineChart"))
        assert len(charts) == 3
        conversions = 0
        from_rich_text = Content.from_rich_text

        def counted(*args: Any, **kwargs: Any) -> Content:
            nonlocal conversions
            conversions += 1
            return from_rich_text(*args, **kwargs)

        Content.from_rich_text = counted  # type: ignore[method-assign]
        try:
            for chart in charts:
                chart._generation += 1  # new data: the chart is drawn again
                chart.refresh()
            await pilot.pause()
            await pilot.pause()
        finally:
            Content.from_rich_text = from_rich_text  # type: ignore[method-assign]
        assert conversions == 0
        for chart in charts:
            visual = chart.render()
            assert isinstance(visual, ChartStrips) and chart.has_data
            width, height = chart.size
            ours = Visual.to_strips(chart, visual, width, height, chart.visual_style)
            textual = Visual.to_strips(chart, Content.from_rich_text(visual.text, console=app.console), width, height,
                                       chart.visual_style)
            a, b = _cells(ours), _cells(textual)
            assert len(a) == len(b) == height
            for y, (la, lb) in enumerate(zip(a, b, strict=True)):
                assert len(la) == len(lb) == width, (chart.id, y)
                diff = [(x, ca, cb) for x, (ca, cb) in enumerate(zip(la, lb, strict=True)) if ca != cb]
                assert not diff, (chart.id, y, diff[:5])

    drive(body)


def test_the_overview_figures_are_padded_text_where_they_fit_else_a_table() -> None:
    """The figures change every second (the step count): as pre-padded text they cost a
    fraction of a Rich table, which is measured and laid out at every repaint. Where a
    value does not fit beside its label (80 columns, a device peak) the table wraps it
    in its own column."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from mpsprofiler.tui.widgets.overview import figures_table

    async def body(app: MpsprofApp, pilot: Any) -> None:
        figures = app.query_one("#ov-figures", Static)
        app._drawn.clear()
        app._redraw(force=True)  # the live view's next second (the first draw came before any layout)
        await pilot.pause()
        assert isinstance(figures.content, Text)
        state = app.state
        width = figures.content_size.width
        console = Console(width=width, color_system="truecolor", legacy_windows=False)

        def cells(renderable: Any) -> list[list[tuple[str, str]]]:
            lines = console.render_lines(renderable, console.options.update_width(width), pad=False)
            return [[(ch, str(seg.style or "none")) for seg in line for ch in seg.text] for line in lines]

        assert cells(figures_table(state, width)) == cells(figures_table(state))  # width 0: the table
        assert isinstance(figures_table(state, 12), Table)  # "params 25,578 float32" does not fit

    drive(body)


def test_a_growing_log_scrolls_without_laying_the_screen_out() -> None:
    async def body(app: MpsprofApp, pilot: Any) -> None:
        await pilot.press("6")
        await pilot.pause()
        panel = app.query_one(LogPanel)
        log = panel.output
        log.write("".join(f"line {i}\n" for i in range(200)))  # a scrollbar appears: one layout
        log.catch_up()
        await pilot.pause()
        layouts = LayoutCounter(app)
        for n in range(5):
            log.write("".join(f"more {n}.{i}\n" for i in range(10)))
            log.catch_up()  # what the app's 1 s redraw does
            await pilot.pause()
        assert layouts.count == 0
        assert log.virtual_size.height == log.line_count
        assert log.is_vertical_scroll_end  # it follows the output
        shown = "\n".join(log.render_line(y).text for y in range(log.size.height))
        assert "more 4.9" in shown
        assert f"{log.line_count} lines shown" in str(panel.query_one("#log-path", Static).render())

    drive(body)


def test_output_for_a_hidden_log_panel_does_not_touch_the_screen() -> None:
    async def body(app: MpsprofApp, pilot: Any) -> None:
        panel = app.query_one(LogPanel)  # the Overview is up
        refreshed: list[str] = []
        for widget in (panel.output, panel.query_one("#log-path", Static)):
            original = widget.refresh

            def counted(*args: Any, _original: Any = original, _id: str = widget.id or "", **kwargs: Any) -> Any:
                refreshed.append(_id)
                return _original(*args, **kwargs)

            widget.refresh = counted  # type: ignore[method-assign]
        for n in range(8):
            panel.write(f"epoch {n}\n")
            await pilot.pause()
        assert refreshed == []
        await pilot.press("6")  # shown: it catches up at once
        await pilot.pause()
        assert panel.output.buffer.plain_lines()[-1] == "epoch 7"
        assert "epoch 7" in "\n".join(panel.output.render_line(y).text for y in range(panel.output.size.height))

    drive(body)


def test_header_figures_lay_the_screen_out_only_when_they_outgrow_their_place() -> None:
    async def body(app: MpsprofApp, pilot: Any) -> None:
        header = app.query_one(RunHeader)
        header._set("#hdr-rate", "[b]10000.0[/] steps/s")
        await pilot.pause()
        label = header.query_one("#hdr-rate", Label)
        assert label.content_size.width == len("10000.0 steps/s")
        assert not _needs_layout(label, len("9999.9 steps/s"))  # a digit less: keeps its place
        assert _needs_layout(label, len("100000.0 steps/s"))  # wider: must move its neighbours
        assert _needs_layout(label, len("9.9 steps/s"))  # much narrower: close the gap
        elapsed = header.query_one("#hdr-elapsed", Label)  # min-width 8: "0:42" never shrinks it
        assert not _needs_layout(elapsed, len("0:42"))
        layouts = LayoutCounter(app)
        header._set("#hdr-rate", "[b]9999.9[/] steps/s")
        await pilot.pause()
        assert layouts.count == 0
        assert "9999.9 steps/s" in str(label.render())

    drive(body)


def test_a_findings_new_figures_patch_its_markdown_in_place() -> None:
    async def body(app: MpsprofApp, pilot: Any) -> None:
        await pilot.press("2")
        await pilot.pause()
        panel = app.query_one(FindingsPanel)
        markdown = panel.query_one("#fd-markdown", Markdown)
        old = markdown.source
        evidence = next(line for line in old.splitlines() if any(c.isdigit() for c in line) and not line.startswith("#"))
        new = old.replace(evidence, evidence + " 12345 more")
        blocks = list(markdown.children)
        assert patch_markdown(markdown, old, new)
        await pilot.pause()
        assert list(markdown.children) == blocks  # the same widgets: nothing removed or mounted
        assert markdown.source == new
        assert any("12345 more" in str(block.render()) for block in blocks)
        # a different shape (one paragraph more) is a rebuild
        assert not patch_markdown(markdown, new, new.replace("## Fix", "An extra paragraph.\n\n## Fix"))

    drive(body)


@pytest.mark.slow
def test_the_benchmark_counts_aggregated_steps(tmp_path: Path) -> None:
    """Past the probe's detail limit (20,000 steps, or ~2,000 for steps this fast) steps
    arrive only as aggregates: the benchmark's step counter must still see every step (it
    said 141 steps/s where the script did ~2,000)."""
    from mpsprofiler.probe.steps import FAST_AFTER, FAST_BLOCK

    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import tui_cpu
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    script = tmp_path / "train.py"
    script.write_text(tui_cpu.TRAIN, encoding="utf-8")
    run_dir = tmp_path / "run"
    done = mpsprof_cli("run", "--headless", "-o", str(run_dir), "--max-steps", "25000", str(script), "0",
                       str(tmp_path / "never"), env=child_env(), timeout=170)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    total = summary["steps"]["count"]
    assert total >= 25000
    assert tui_cpu.count_steps(run_dir) == total
    # steps this fast go one by one only for the early window (see probe.steps.FAST_STEP)
    detailed = 0
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        if line.startswith('{"k":"steps"'):
            detailed += len(json.loads(line).get("i") or [])
    assert FAST_AFTER <= detailed <= FAST_AFTER + FAST_BLOCK


def test_a_costly_diagnosis_backs_off_and_a_cheap_one_runs_every_second() -> None:
    """The live diagnosis may take ~1.5% of a core: on a long run (trend statistics over
    hundreds of samples, tens of ms) it re-runs every few seconds instead of every second."""
    from mpsprofiler.tui import app as app_module

    async def body(app: MpsprofApp, pilot: Any) -> None:
        runs: list[float] = []
        cost = {"s": 0.03}

        def diagnose() -> None:  # the real one, plus CPU time standing for a long run's statistics
            runs.append(cost["s"])
            end = time.thread_time() + cost["s"]
            while time.thread_time() < end:
                pass

        app._diagnose = diagnose  # type: ignore[method-assign]
        app._last_diagnosis = 0.0
        app.session.version += 1
        app._tick()  # the first one (it also loads the rules) does not count
        assert runs and app._diagnose_every == app_module.DIAGNOSE_EVERY
        app._last_diagnosis = 0.0
        app.session.version += 1
        app._tick()
        assert len(runs) == 2 and app._diagnose_every == pytest.approx(0.03 / app_module.DIAGNOSE_SHARE, rel=0.3)
        app.session.version += 1
        app._last_diagnosis = time.monotonic() - 1.1  # a second later: not yet
        app._tick()
        assert len(runs) == 2
        app._last_diagnosis = time.monotonic() - app._diagnose_every - 0.01
        cost["s"] = 0.0  # cheap again (a new session, a short run): back to every second
        app._tick()
        assert len(runs) == 3 and app._diagnose_every == app_module.DIAGNOSE_EVERY

    drive(body)
