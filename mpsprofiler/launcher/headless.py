"""Headless mode: the script's output passes through untouched; the run finished at the end.

Whatever goes wrong on our side (a broken rule file, a bug in an analyzer or in the
summary) is said in one ``mpsprof:`` line and never changes the script's exit status. The
launcher renders nothing: the caller prints the summary (``report.console.print_summary``)
from the :class:`~mpsprofiler.results.Finished` it gets back.
"""

from __future__ import annotations

import dataclasses
import signal
import sys
from pathlib import Path

from ..results import Finished, Results, finish_run, say_rule_problems
from ..session.session import Session
from .child import RunController, RunSpec
from .signals import forwardable, install


def run_headless(spec: RunSpec, rule_dirs: list[Path]) -> tuple[int, Session, Finished]:
    _say_rule_problems(rule_dirs)
    session = Session()
    # nobody shows the steps live: the probe's channel wakes (and takes the GIL) half as often
    spec = dataclasses.replace(spec, options=spec.options.with_changes(headless=True))
    controller = RunController(spec, session.feed_many)
    # every signal the script could handle is passed on; one ignored at start stays
    # ignored, for us and (inherited through exec) for the script: see signals.py
    restore = [install(forwardable(), controller.forward_signal)]
    try:
        controller.start()
        if signal.SIGCONT in controller.forwarded_signals():
            restore.append(install([signal.SIGCONT], controller.forward_signal))
        code = controller.wait()
    finally:
        for undo in reversed(restore):
            undo()
    finished = finish_run(session, rule_dirs, spec.run_dir, controller.recorder.error)
    if finished.diagnosis_error:
        sys.stderr.write(f"mpsprof: {finished.diagnosis_error}\n")
    _say_broken_rules(finished.results, rule_dirs)
    if finished.write_error:
        sys.stderr.write(f"mpsprof: {finished.write_error}\n")
    return code, session, finished


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
