"""``mpsprof compare RUN_A RUN_B``: two recorded runs side by side, through the real CLI and
the real Textual pilot."""

from __future__ import annotations

from pathlib import Path

from mpsprofiler.compare import rows
from tests.helpers import mpsprof_cli

RECORDED = Path(__file__).resolve().parent.parent / "fixtures" / "recordings" / "slow_dataloader"


def _changed_copy(tmp_path: Path) -> Path:
    """The same recording with its steps twice as fast and a --set change recorded."""
    import json

    out = tmp_path / "b"
    out.mkdir()
    lines = []
    for line in (RECORDED / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event.get("k") == "steps":
            event["dur"] = [d / 2 for d in event.get("dur") or []]
            event["wait"] = [w / 4 for w in event.get("wait") or []]
        if event.get("k") == "run":
            event["settings"] = ["dataloader.num_workers=4"]
        lines.append(json.dumps(event))
    lines.insert(2, json.dumps({"k": "override", "ts": 0.1, "target": "dataloader 1",
                                "applied": {"num_workers": [0, 4]}, "skipped": []}))
    (out / "events.jsonl").write_text("\n".join(lines) + "\n")
    return out


def test_compare_text_md_html_side_by_side(tmp_path: Path) -> None:
    b = _changed_copy(tmp_path)
    proc = mpsprof_cli("compare", str(RECORDED), str(b))
    assert proc.returncode == 0, proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("median step"))
    assert "x0.50 (2.00x faster)" in line
    assert "dataloader 1: num_workers 0 → 4" in proc.stdout
    md = mpsprof_cli("compare", "-f", "md", str(RECORDED), str(b)).stdout
    assert "| median step |" in md and "x0.50 (2.00x faster)" in md
    out = tmp_path / "cmp.html"
    proc = mpsprof_cli("compare", "-f", "html", "-o", str(out), str(RECORDED), str(b))
    assert proc.returncode == 0 and "<th>median step</th>" in out.read_text()
    bad = mpsprof_cli("compare", str(RECORDED), str(tmp_path / "nope"))
    assert bad.returncode == 2 and "mpsprof: error" in bad.stderr


def test_compare_rows_ratio() -> None:
    a = {"steps": {"median_s": 0.04, "count": 10}, "memory": {"peak_rss_with_workers": 100}}
    b = {"steps": {"median_s": 0.01, "count": 10}, "memory": {"peak_rss_with_workers": 300}}
    table = {r.label: r for r in rows(a, b)}
    assert table["median step"].ratio == "x0.25 (4.00x faster)"
    assert table["peak RSS (with workers)"].ratio == "x3.00"
    assert "peak device memory" not in table  # neither run has the figure


def test_compare_tui_shows_both_runs(tmp_path: Path) -> None:
    import asyncio

    from textual.widgets import DataTable

    from mpsprofiler.compare import CAUTION, load_summary
    from mpsprofiler.tui.compare import CompareApp

    b = _changed_copy(tmp_path)
    app = CompareApp(str(RECORDED), str(b), rows(load_summary(RECORDED), load_summary(b)), CAUTION)

    async def main() -> None:
        async with app.run_test(size=(140, 40)) as pilot:
            table = app.query_one(DataTable)
            cells = {str(table.get_row_at(i)[0]): [str(c) for c in table.get_row_at(i)]
                     for i in range(table.row_count)}
            assert cells["median step"][3] == "x0.50 (2.00x faster)"
            assert "num_workers 0 → 4" in cells["changed"][2]
            await pilot.press("q")

    asyncio.run(main())
