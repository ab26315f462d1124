"""Headless mode: the script's output passes through untouched; a summary at the end."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any, Callable

from ..report.console import render_console
from ..results import Results, build_results, write_summary
from ..session.session import Session
from .child import RunController, RunSpec

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def run_headless(
    spec: RunSpec,
    rule_dirs: list[Path],
    quiet: bool = False,
    after: Callable[[Session, Results], None] | None = None,
) -> tuple[int, Session, Results]:
    session = Session()
    controller = RunController(spec, session.feed_many)
    previous: dict[int, Any] = {}

    def forward(signum: int, frame: Any) -> None:
        controller.forward_signal(signum)

    for sig in FORWARDED:
        try:
            previous[sig] = signal.signal(sig, forward)
        except (ValueError, OSError):  # not the main thread
            pass
    try:
        controller.start()
        code = controller.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    results = build_results(session, rule_dirs)
    run_dir = spec.run_dir if controller.recorder.error is None else None
    if run_dir is not None:
        error = write_summary(run_dir, results)
        if error:
            sys.stderr.write(f"mpsprof: {error}\n")
            run_dir = None
    if after is not None:
        after(session, results)
    if not quiet:
        sys.stderr.write(render_console(results.summary, results.findings, str(run_dir) if run_dir else None))
        sys.stderr.flush()
    return code, session, results
