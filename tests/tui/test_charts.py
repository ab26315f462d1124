"""The TUI's text charts: round ticks, flat series, stacked areas, shared x ranges."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from rich.style import Style

from mpsprofiler.session.recording import load_run
from mpsprofiler.tui.app import recorded_app
from mpsprofiler.tui.chart_render import Series, nice_ticks, render_chart
from mpsprofiler.tui.chart_series import step_series, time_range
from mpsprofiler.tui.widgets.charts import LineChart

REPO = Path(__file__).resolve().parents[2]
RECORDING = REPO / "tests" / "fixtures" / "recordings" / "slow_dataloader"
BLUE, ORANGE = (97, 175, 239), (229, 152, 75)


def axis_labels(text: str) -> list[str]:
    """The y tick labels: what stands before a ``┤`` at the start of a row."""
    return [m.group(1) for m in re.finditer(r"^ *([-0-9.kM]+)┤", text, re.M)]


def test_ticks_are_round_numbers() -> None:
    assert nice_ticks(0, 165.7) == [0, 50, 100, 150, 200]
    assert nice_ticks(0, 0.3) == [0, 0.1, 0.2, 0.3]
    assert nice_ticks(1, 59, 5, integer=True) == [0, 20, 40, 60]
    assert nice_ticks(0, 7.4, 4) == [0, 2, 4, 6, 8]


def test_a_flat_or_all_zero_series_gets_a_plain_axis() -> None:
    text = render_chart(40, 10, [float(i) for i in range(20)], [Series("swap", [0.0] * 20, BLUE)]).plain
    labels = axis_labels(text)
    assert labels[0] == "1.0" and labels[-1] == "0.0"
    assert all(len(label) <= 4 for label in labels), labels
    flat = axis_labels(render_chart(40, 10, [0.0, 1.0], [Series("x", [3.0, 3.0], BLUE)], ylim=(None, None)).plain)
    assert all(len(label) <= 3 for label in flat), flat


def test_step_chart_stacks_data_wait_and_the_rest_on_round_ticks() -> None:
    """The recorded slow-DataLoader run: two areas (data wait, the rest of the step) whose
    top is the step time; the axis reads 0 .. a round number above the slowest step."""
    session = load_run(RECORDING).session
    xs, lines, unit = step_series(session)
    assert unit == "ms" and [line.label for line in lines] == ["data wait", "rest of step"]
    assert all(line.fill for line in lines)
    points = [p for p in session.steps.chart.points() if p.i >= session.steps.warmup]
    for n, p in enumerate(points):
        assert abs(lines[0].values[n] + lines[1].values[n] - p.dur * 1e3) < 1e-6
    text = render_chart(60, 14, xs, [Series(line.label, line.values, line.color, area=True) for line in lines],
                        xlabel="step", integer_x=True)
    labels = [float(label) for label in axis_labels(text.plain)]
    assert labels[-1] == 0 and labels[0] >= max(p.dur for p in points) * 1e3
    steps = {round(b - a, 6) for a, b in zip(labels[1:], labels[:-1], strict=True)}
    assert len(steps) == 1 and next(iter(steps)) in {1, 2, 2.5, 5, 10, 20, 25, 50, 100}
    assert "■ data wait" in text.plain and "■ rest of step" in text.plain and "x: step" in text.plain
    colors = {span.style.color.triplet for span in text.spans
              if isinstance(span.style, Style) and span.style.color is not None}
    assert {BLUE, ORANGE} <= {tuple(c) for c in colors if c is not None}


def test_memory_and_cpu_charts_share_the_time_range() -> None:
    """In the app: the Overview's memory and CPU charts, and the Memory panel's two
    charts, plot over one x range, the run's sampled seconds."""
    app = recorded_app(load_run(RECORDING))
    seen: dict[str, object] = {}

    async def main() -> None:
        async with app.run_test(size=(130, 40)) as pilot:
            await pilot.pause()
            await pilot.press("4")
            await pilot.pause()
            for chart in app.query(LineChart):
                seen[chart.id or ""] = chart._xlim

    asyncio.run(main())
    span = time_range(load_run(RECORDING).session)
    assert span is not None and span[1] > span[0]
    assert seen["ov-mem"] == seen["ov-cpu"] == seen["mem-chart"] == seen["mem-system"] == span
