"""What every panel renders from: the session plus the app's view of the run.

Panels get one :class:`RunState` per refresh and redraw only what changed (each keeps
the ``session.version`` / findings it drew last). The figures shown in the header are
computed here, away from any widget, so they are easy to test.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..session.session import Session
from ..session.steps import StepPoint
from .terminal import TerminalBuffer

RATE_WINDOW = 10.0
"""Seconds of recent steps the live steps/s figure is measured over."""


@dataclass
class RunState:
    session: Session
    live: bool
    findings: list[Any] = field(default_factory=list)
    rule_errors: list[Any] = field(default_factory=list)
    stopping: bool = False
    started_at: float | None = None
    """``time.monotonic()`` when a live run started; None for recorded runs."""
    ended_after: float | None = None
    """Elapsed seconds frozen at the end of a live run."""
    run_dir: Path | None = None
    output_path: Path | None = None
    notes: str = ""
    failed: str | None = None
    """Why the script could not be started, if it could not."""
    findings_version: int = 0
    """Bumped whenever ``findings`` is replaced."""
    output: TerminalBuffer | None = None
    """The script's output as the Log panel holds it (the Overview shows its tail)."""

    # -- status ---------------------------------------------------------------------
    @property
    def status(self) -> str:
        """running | stopping | finished | crashed | stopped | failed."""
        if self.failed:
            return "failed"
        status = self.session.status
        if status == "running" and self.stopping:
            return "stopping"
        if status == "running" and not self.live:
            # a recording without an exit event: the run (or mpsprof) died mid-way
            return "incomplete"
        return status

    @property
    def running(self) -> bool:
        return self.status in ("running", "stopping")

    def status_text(self) -> str:
        status = self.status
        ex = self.session.exit
        if status == "crashed" and ex is not None:
            if ex.signal_name:
                return f"crashed ({ex.signal_name})"
            return f"crashed (exit {ex.returncode})"
        if status == "stopping":
            return "stopping…"
        if status == "failed":
            return "failed to start"
        return status

    # -- figures --------------------------------------------------------------------
    def elapsed(self, now: float | None = None) -> float | None:
        """Wall seconds of the run; frozen for recorded and ended runs (deterministic)."""
        if self.ended_after is not None:
            return self.ended_after
        if self.live and self.started_at is not None and self.session.exit is None:
            return (now if now is not None else time.monotonic()) - self.started_at
        ex = self.session.exit
        if ex is not None and ex.duration is not None:
            return float(ex.duration)
        return self.session.last_ts or None

    def steps_per_second(self) -> float | None:
        steps = self.session.steps
        if self.running:
            rate = recent_rate(steps.series.points())
            if rate is not None:
                return rate
        median = steps.quantile(0.5)
        return 1.0 / median if median else None

    def findings_by_severity(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for f in self.findings:
            counts[f.severity] = counts.get(f.severity, 0) + 1
        return counts


def recent_rate(points: list[StepPoint], window: float = RATE_WINDOW) -> float | None:
    """Steps per second over the last ``window`` seconds of step ends."""
    if len(points) < 2:
        return None
    last = points[-1]
    first_i = len(points) - 2
    while first_i > 0 and last.end - points[first_i - 1].end <= window:
        first_i -= 1
    first = points[first_i]
    span = last.end - first.end
    if span <= 0:
        return None
    return (last.i - first.i) / span


def fmt_clock(seconds: float | None) -> str:
    """``0:42``, ``12:03``, ``1:02:03``: what a user reads at a glance."""
    if seconds is None:
        return "–"
    total = int(max(0.0, seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"
