"""The types of the run's summary (``summary.json`` without its findings), where the code
that builds it can use them.

:func:`~.summary.summarize` builds a :class:`Summary` from the session, so mypy checks the
builder against the same types the views read (reports, the TUI, ``mpsprof compare``).
They live in the session layer because the builder does, and the session may not import
upward; :mod:`mpsprofiler.results` re-exports them beside the types that hold findings and
experiments (:class:`~mpsprofiler.results.Document`). docs/report-schema.md is the
contract; ``tests/e2e/test_typed_results.py`` holds these types to ``report/schema.json`` and
to a recorded run.
"""

from __future__ import annotations

from typing import Any, TypedDict

from ..events.payloads import CutFields, DataLoaderFields, Frame, ProbeErrorFields


class ExitDoc(TypedDict):
    """``exit``: how the script ended."""

    returncode: int
    signal: str | None
    stopped_by_user: bool


class DeviceDoc(TypedDict):
    """``device``: what the training ran on."""

    kind: str
    name: str | None
    model_device: str | None
    parameters: int | None


class StepsDoc(TypedDict):
    """``steps``: step timing (seconds, shares 0..1; None where not measured)."""

    count: int
    mode: str
    framework: str | None
    fetched_ahead: int | None
    optimizers: int
    """Optimizers that step in one step (1, or a GAN's 2: a framework's count of optimizer steps is that many times ``count``)."""
    warmup: int
    """Warm-up steps as the long-warmup finding counts them (``session.warmup.framework_warmup``)."""
    warmup_apart: int
    """Slow steps after the warm-up that the steady figures leave out too (sampled by mpsprof,
    an evaluation of the script's): the steady steps start after them."""
    warmup_apart_sampled: int
    """How many of ``warmup_apart`` mpsprof sampled for op accounting."""
    steady: int
    median_s: float | None
    p90_s: float | None
    steps_per_s: float | None
    training_s: float | None
    warmup_cost_s: float | None
    data_wait_share: float | None
    device_busy_share: float | None
    device_busy_ms: float | None
    batches: int


class MemoryDoc(TypedDict):
    """``memory``: peaks and limits, bytes."""

    peak_rss: int | None
    peak_rss_with_workers: int | None
    peak_device_allocated: int | None
    peak_device_cached: int | None
    device_total: int | None
    device_limit: int | None
    min_system_available: int | None
    peak_swap_used: int | None


class CrashDoc(TypedDict):
    """``crash``: the script's uncaught exception; ``where`` is the user's innermost frame."""

    type: str
    message: str
    where: Frame | None


class RecordingDoc(TypedDict):
    """``recording``: whether the recording holds the whole run, and what is missing."""

    complete: bool
    problems: list[str]


class OpsCostDoc(TypedDict):
    """``ops``: what op accounting cost the run."""

    sampled_steps: int
    cost_s: float | None
    cost_share: float | None
    converged: bool


class AppliedDoc(TypedDict):
    """One setting ``--set`` changed: on which object, its name, its value before and after."""

    target: str
    name: str
    before: Any
    after: Any


class SkippedDoc(TypedDict):
    """One ``--set`` setting that could not be applied, and why."""

    target: str
    setting: str
    reason: str


class _ChangesRequired(TypedDict):
    asked: list[str]
    applied: list[AppliedDoc]
    skipped: list[SkippedDoc]


class ChangesDoc(_ChangesRequired, total=False):
    """``changes``: what ``--set`` asked for, what it changed, what it could not."""

    replaced: dict[str, str]
    """Variable -> the shell's value that an ``env.`` setting took the place of (absent
    where none)."""


class RankRow(TypedDict):
    """One rank of a distributed run (``ranks``; the Ranks panel and the reports' table)."""

    rank: int
    local_rank: int | None
    steps: int
    median_s: float | None
    p90_s: float | None
    data_wait_share: float | None
    data_wait_per_step_s: float | None
    peak_memory: int | None
    device: str | None
    status: str


class _SummaryCore(TypedDict):
    script: str
    status: str


class Summary(_SummaryCore, total=False):
    """``summary.json`` without its findings (:meth:`~mpsprofiler.results.Results.document`
    adds them).

    Every key but ``script`` and ``status`` may be absent: a recording read back from an
    older version, or the bare summary left when building the figures failed; the views
    read them with ``.get``. ``ops`` and ``ranks`` appear only when measured."""

    schema: int
    argv: list[str] | None
    cwd: str | None
    run_dir: str | None
    started: float | None
    exit: ExitDoc | None
    duration_s: float | None
    device: DeviceDoc
    steps: StepsDoc
    memory: MemoryDoc
    dataloaders: list[DataLoaderFields]
    crash: CrashDoc | None
    probe_errors: list[ProbeErrorFields]
    recording: RecordingDoc
    changes: ChangesDoc | None
    cut: CutFields | None
    ops: OpsCostDoc
    ranks: list[RankRow]
