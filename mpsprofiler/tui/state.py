"""What every panel renders from: the session plus the app's view of the run.

Panels get one :class:`RunState` per refresh and redraw only what changed (each keeps
the :attr:`RunState.view_key` / findings it drew last). The figures shown in the header
are computed here, away from any widget, so they are easy to test.

A distributed run has one session per rank: ``state.session`` is the rank the user
picked (the job's own session, which shows rank 0, until they pick another), while the
run's status, elapsed time and findings are the job's (``state.job``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..session.exit_words import exited_by_itself
from ..session.session import Session
from ..session.steps import StepPoint
from .terminal import TerminalBuffer

if TYPE_CHECKING:
    from ..diagnosis.findings import Finding
    from ..diagnosis.rules import RuleError

RATE_WINDOW = 10.0
"""Seconds of recent steps the live steps/s figure is measured over."""


@dataclass
class RunState:
    job: Session
    """The whole run (for a distributed run: rank 0's figures, every rank's crash)."""
    live: bool
    findings: list[Finding] = field(default_factory=list)
    rule_errors: list[RuleError | str] = field(default_factory=list)
    """Problems of the rule files, and why diagnosis failed (text) when it did."""
    stopping: bool = False
    started_at: float | None = None
    """``time.monotonic()`` when a live run started; None for recorded runs."""
    ended_after: float | None = None
    """Elapsed seconds frozen at the end of a live run."""
    run_dir: Path | None = None
    notes: str = ""
    failed: str | None = None
    """Why the script could not be started, if it could not."""
    findings_version: int = 0
    """Bumped whenever ``findings`` is replaced."""
    output: TerminalBuffer | None = None
    """The script's output as the Log panel holds it (the Overview shows its tail)."""
    rank: int | None = None
    """The rank the per-run panels show; None: the job's own session (its primary rank)."""
    expected_ranks: int = 0
    """Ranks a live torchrun launch will start (known before the first event), else 0."""

    # -- ranks ----------------------------------------------------------------------
    @property
    def session(self) -> Session:
        """The session the per-run panels draw: the picked rank's, else the job's."""
        if self.rank is not None and self.rank != self.job.primary_rank:
            sub = self.job.ranks.get(self.rank)
            if sub is not None:
                return sub
        return self.job

    @property
    def distributed(self) -> bool:
        """Several ranks: seen in the events, or announced by a live torchrun launch."""
        return self.job.is_distributed or self.expected_ranks > 1

    @property
    def shown_rank(self) -> int:
        """The rank whose figures are on screen (the job view shows its primary rank)."""
        if self.rank is not None and self.rank in self.job.ranks:
            return self.rank
        return self.job.primary_rank

    @property
    def rank_choices(self) -> list[int | None]:
        """What ``r`` cycles through: the job view (its primary rank), then every other rank."""
        return [None, *(r for r in sorted(self.job.ranks) if r != self.job.primary_rank)]

    def step_rank(self, delta: int) -> int | None:
        """Move the selection ``delta`` places along :attr:`rank_choices` (wrapping)."""
        choices = self.rank_choices
        current = self.rank if self.rank in choices else None
        self.rank = choices[(choices.index(current) + delta) % len(choices)]
        return self.rank

    def select_rank(self, rank: int | None) -> bool:
        """Show ``rank`` (None or the primary rank: the job view); False if unknown."""
        if rank is None or rank == self.job.primary_rank:
            self.rank = None
            return True
        if rank not in self.job.ranks:
            return False
        self.rank = rank
        return True

    @property
    def world(self) -> int:
        return max(len(self.job.ranks), self.expected_ranks)

    def rank_name(self) -> str:
        """``job (rank 0)`` or ``rank 1``: what the per-run panels show."""
        if self.session is self.job:
            return f"job (rank {self.job.primary_rank})"
        return f"rank {self.shown_rank}"

    def rank_label(self) -> str:
        """``job (rank 0) · 2 ranks`` or ``rank 1/2``; empty for a single process."""
        if not self.distributed:
            return ""
        if self.session is self.job:
            return f"{self.rank_name()} · {self.world} ranks"
        return f"rank {self.shown_rank}/{self.world}"

    @property
    def view_key(self) -> tuple[int | None, int, int]:
        """Changes whenever what the per-run panels show changes (new events, other rank)."""
        session = self.session
        return (self.rank if session is not self.job else None, id(session), session.version)

    # -- status ---------------------------------------------------------------------
    @property
    def status(self) -> str:
        """running | stopping | finished | crashed | stopped | failed."""
        if self.failed:
            return "failed"
        status = self.job.status
        if status == "running" and self.stopping:
            return "stopping"
        if status == "running" and not self.live:
            # a recording without an exit event: the run (or mpsprof) died mid-way
            return "incomplete"
        return status

    @property
    def running(self) -> bool:
        return self.status in ("running", "stopping")

    def _status_only(self) -> str:
        status = self.status
        ex = self.job.exit
        if status == "crashed" and ex is not None:
            if ex.signal_name:
                return f"crashed ({ex.signal_name})"
            if exited_by_itself(ex.returncode, ex.signal_name, self.session.crash):
                return f"exited (status {ex.returncode})"  # sys.exit(N): no exception
            return f"crashed (exit {ex.returncode})"
        if status == "stopping":
            return "stopping…"
        if status == "failed":
            return "failed to start"
        if status == "stopped":  # q, s or Ctrl-C: the user's stop, not a crash
            return f"stopped at step {self.job.steps.count}"
        return status

    def status_text(self) -> str:
        """The badge: the status, and whether the recording misses part of the run."""
        text = self._status_only()
        if self.job.exit is not None and self.job.recording_problems():
            text += ", recording incomplete"
        return text

    # -- figures --------------------------------------------------------------------
    def elapsed(self, now: float | None = None) -> float | None:
        """Wall seconds of the run; frozen for recorded and ended runs (deterministic)."""
        if self.ended_after is not None:
            return self.ended_after
        if self.live and self.started_at is not None and self.job.exit is None:
            return (now if now is not None else time.monotonic()) - self.started_at
        ex = self.job.exit
        if ex is not None and ex.duration is not None:
            return float(ex.duration)
        return self.job.last_ts or None

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
