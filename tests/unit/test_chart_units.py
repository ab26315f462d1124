"""One unit policy for charts of bytes: the TUI's memory charts and the reports' SVG charts
pick the same unit for the same figures (they disagreed between 1 and 2 GiB)."""

from __future__ import annotations

from mpsprofiler.report import charts as report_charts
from mpsprofiler.tui import chart_series
from mpsprofiler.units import GIB, MIB, chart_bytes_unit


def test_tui_and_report_charts_choose_the_same_unit() -> None:
    for largest in (300 * MIB, GIB - 1, GIB, 1.5 * GIB, 2 * GIB, 40 * GIB):
        expected = chart_bytes_unit(largest)
        assert chart_series._unit(largest) == expected
        assert report_charts._bytes_unit(largest) == expected
    assert chart_bytes_unit(1.5 * GIB) == (GIB, "GiB") and chart_bytes_unit(900 * MIB) == (MIB, "MiB")
