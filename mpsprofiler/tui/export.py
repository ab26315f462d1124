"""``e`` in the TUI: write the report (Markdown and HTML) into the run directory."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..rundir import REPORT_FILES, write_text_atomic

if TYPE_CHECKING:
    from ..results import Results
    from ..session.session import Session

EXPORTS = REPORT_FILES


def export_reports(session: Session, results: Results, run_dir: Path | None) -> tuple[list[Path], str | None]:
    """Render and write each report; returns what was written and the first error."""
    if run_dir is None:
        return [], "this run has no run directory to write into"
    from ..report import format_for_path, render_report

    written: list[Path] = []
    for name in EXPORTS:
        path = Path(run_dir) / name
        try:
            text = render_report(format_for_path(path), session, results)
        except Exception as exc:  # noqa: BLE001 - a renderer bug must not close the TUI
            return written, f"cannot render {name}: {type(exc).__name__}: {exc}"
        error = write_text_atomic(path, text)
        if error:
            return written, error
        written.append(path)
    return written, None
