"""From a session to its results: summary figures plus findings.

One function for a live run's end, ``mpsprof view`` and ``mpsprof report``, so every
view shows the same findings for the same run.

This module is also the typed seam above the session: :class:`Summary` (defined in
:mod:`.session.documents`, where :func:`~.session.summary.summarize` builds it, and
re-exported here with its sections), the finding document (:class:`FindingDoc`, owned by :mod:`.diagnosis.findings`) and
:class:`ExperimentResult` are the JSON the run directory stores (``summary.json``,
``experiments.json``; docs/report-schema.md is the contract), typed, so the views
(reports, TUI panels) read named keys instead of a ``dict[str, Any]``.
``tests/e2e/test_typed_results.py`` holds these types to the schema and to a recorded run.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, cast

from .diagnosis.findings import FindingDoc
from .events import json_safe
from .rundir import SUMMARY_FILE, read_experiments, write_text_atomic
from .session.documents import (
    AppliedDoc,
    ChangesDoc,
    CrashDoc,
    DeviceDoc,
    ExitDoc,
    MemoryDoc,
    OpsCostDoc,
    RankRow,
    RecordingDoc,
    SkippedDoc,
    StepsDoc,
    Summary,
)
from .session.session import Session
from .session.summary import summarize

if TYPE_CHECKING:
    from .diagnosis.findings import Finding
    from .diagnosis.rules import RuleError

__all__ = [
    "AppliedDoc", "ChangesDoc", "CrashDoc", "DeviceDoc", "Document", "ExitDoc", "ExperimentResult", "Finished",
    "MemoryDoc", "OpsCostDoc", "RankRow", "RecordingDoc", "Results", "SkippedDoc", "StepsDoc", "Summary",
    "build_results", "finish_run", "say_rule_problems", "summary_of", "write_summary",
]


class _ExperimentCore(TypedDict):
    rule: str | None
    change: list[str]
    label: str
    command: str
    cwd: str | None
    steps: int
    pairs_planned: int
    pairs: int
    seconds: float
    stopped: str | None
    finished: float
    a_median_s: list[float]
    b_median_s: list[float]
    speedup: float | None
    interval: list[float] | None
    memory: dict[str, int | None]
    loss: dict[str, Any] | None


class ExperimentResult(_ExperimentCore, total=False):
    """One ``mpsprof try`` result (:meth:`~mpsprofiler.experiment.trial.Trial.result`), as
    ``experiments.json`` stores it; ``runs`` stays out of ``summary.json``. ``verdict`` and
    ``headline`` are set last (always, by ``Trial.result``); ``patch --prove`` adds the
    ``patch`` keys (``kind``, ``dir``, ``patch_sha``, ``files``, ``patch_verdict``)."""

    runs: list[dict[str, Any]]
    verdict: str
    failure: str
    figure: str
    """``mean``: each run was judged by its mean step (a change that shows in a few steps
    only, experiment/trial.Window), and ``a_median_s``/``b_median_s`` hold those means."""
    pairs_to_settle: int | None
    env_drift: str
    """How the shell the trial ran from differed from the recorded run's environment."""
    headline: str
    kind: str
    dir: str
    patch_sha: str
    files: list[str]
    patch_verdict: str


class Document(Summary, total=False):
    """The whole run document: ``summary.json`` and ``report --format json``."""

    findings: list[FindingDoc]
    rule_errors: list[str]
    experiments: list[ExperimentResult]
    mpsprof: str


@dataclass
class Results:
    summary: Summary
    findings: list[Finding] = field(default_factory=list)
    rule_errors: list[RuleError | str] = field(default_factory=list)
    """Problems of the rule files, and why diagnosis failed (text) when it did."""
    experiments: list[ExperimentResult] = field(default_factory=list)
    """``mpsprof try`` results stored beside the run (``RUN_DIR/experiments.json``)."""

    def document(self) -> Document:
        """The JSON document of ``summary.json`` and of ``report --format json``."""
        doc = cast(Document, dict(self.summary))
        doc["findings"] = [f.to_dict() for f in self.findings]
        doc["rule_errors"] = [str(e) for e in self.rule_errors]
        if self.experiments:
            doc["experiments"] = [cast(ExperimentResult, {k: v for k, v in e.items() if k != "runs"})
                                  for e in self.experiments]
        return doc


def build_results(session: Session, rule_dirs: Iterable[Path] = (), run_dir: Path | None = None) -> Results:
    """Figures, findings and, for a run with a directory, the experiments stored beside it
    (``mpsprof try``, ``t``): attached here, once, so no view patches them in afterwards."""
    summary = summary_of(session)
    experiments = cast(list[ExperimentResult], read_experiments(run_dir))  # stored by Trial.result
    try:
        from .diagnosis import diagnose

        diagnosis = diagnose(session, list(rule_dirs))
    except Exception as exc:  # noqa: BLE001 - the figures are still worth having
        return Results(summary=summary, rule_errors=[f"diagnosis failed: {type(exc).__name__}: {exc}"],
                       experiments=experiments)
    return Results(summary=summary, findings=diagnosis.findings, rule_errors=[*diagnosis.rule_errors],
                   experiments=experiments)


def summary_of(session: Session) -> Summary:
    """The session's figures (:func:`~.session.summary.summarize`, typed where it is built)."""
    return summarize(session)


@dataclass
class Finished:
    """A finished run's results and what became of its ``summary.json``."""

    results: Results
    summary_dir: Path | None = None
    """The run directory ``summary.json`` was written into; None when there is none, its
    recording failed, or the write failed."""
    diagnosis_error: str | None = None
    """Set when building the results failed outright (only the bare summary is left)."""
    write_error: str | None = None


def finish_run(
    session: Session,
    rule_dirs: Iterable[Path],
    run_dir: Path | None,
    recording_error: str | None = None,
    *,
    diagnose: bool = True,
) -> Finished:
    """The end of every run (headless, live TUI, a ``mpsprof try`` trial): build the results,
    then write ``summary.json`` when the recording survived (a run directory, and no
    ``recording_error`` from the recorder). ``diagnose=False`` keeps the figures only (trials
    are compared, not diagnosed). Never raises: a bug in diagnosis or in the summary must not
    cost the run its exit status."""
    diagnosis_error = None
    try:
        results = (build_results(session, rule_dirs, run_dir) if diagnose
                   else Results(summary=summary_of(session)))
    except Exception as exc:  # noqa: BLE001 - build_results survives diagnosis; this is the summary failing
        diagnosis_error = (f"internal error while diagnosing the run ({type(exc).__name__}: {exc}); no findings")
        results = Results(summary={"script": session.script, "status": session.status})
    if run_dir is None or recording_error is not None:
        return Finished(results, None, diagnosis_error)
    error = write_summary(run_dir, results)
    return Finished(results, None if error else Path(run_dir), diagnosis_error, error)


def write_summary(run_dir: Path, results: Results) -> str | None:
    """Write ``summary.json`` atomically; returns an error message instead of raising."""
    return write_text_atomic(Path(run_dir) / SUMMARY_FILE, json.dumps(json_safe(results.document()), indent=2, default=str, allow_nan=False))


def say_rule_problems(errors: Iterable[Any]) -> None:
    """One ``mpsprof: rule file problem`` line per error or warning of the rule files
    (notes are for ``mpsprof rules check``)."""
    for error in errors:
        if getattr(error, "level", "error") != "note":
            sys.stderr.write(f"mpsprof: rule file problem: {error}\n")
