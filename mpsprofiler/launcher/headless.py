"""Headless mode: the script's output passes through untouched; a summary at the end.

Whatever goes wrong on our side (a broken rule file, a bug in an analyzer or in the
summary) is said in one ``mpsprof:`` line and never changes the script's exit status.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

from ..report.console import print_summary
from ..results import Results, build_results, say_rule_problems, write_summary
from ..session.session import Session
from .child import RunController, RunSpec

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def run_headless(spec: RunSpec, rule_dirs: list[Path]) -> tuple[int, Session, Results]:
    _say_rule_problems(rule_dirs)
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
    results = _results(session, rule_dirs)
    _say_broken_rules(results, rule_dirs)
    run_dir = spec.run_dir if controller.recorder.error is None else None
    if run_dir is not None:
        error = write_summary(run_dir, results)
        if error:
            sys.stderr.write(f"mpsprof: {error}\n")
            run_dir = None
    print_summary(results, str(run_dir) if run_dir else None)
    return code, session, results


def _say_rule_problems(rule_dirs: list[Path]) -> None:
    """Report broken user rule files before the run starts, not hours later; the run
    goes on with the rules that loaded."""
    if not rule_dirs:
        return
    try:
        from ..diagnosis import cached_ruleset  # loaded once: diagnosis at the end reuses it

        errors = cached_ruleset(rule_dirs).errors
    except Exception as exc:
        sys.stderr.write(f"mpsprof: the rules could not be loaded ({type(exc).__name__}: {exc}); the run goes on\n")
        return
    say_rule_problems(errors)


def _say_broken_rules(results: Results, rule_dirs: list[Path]) -> None:
    """Rules switched off while evaluated (a regex out of time): said once, at the end."""
    try:
        from ..diagnosis import cached_ruleset

        said = cached_ruleset(rule_dirs).errors
        say_rule_problems([e for e in results.rule_errors if e not in said])
    except Exception:  # noqa: BLE001 - the summary says it too
        pass


def _results(session: Session, rule_dirs: list[Path]) -> Results:
    """Findings and summary; a bug in diagnosis or in the summary must not cost the run its
    exit status. (``build_results`` already survives a failing diagnosis: what escapes it
    is the summary failing, so only the bare minimum is left.)"""
    try:
        return build_results(session, rule_dirs)
    except Exception as exc:
        sys.stderr.write(f"mpsprof: internal error while diagnosing the run ({type(exc).__name__}: {exc}); "
                         "no findings\n")
    return Results(summary={"script": session.script, "status": session.status})
