"""The run's state, folded from events. Pure and replayable.

Both a live run (events from the launcher) and a recording (events read back from
``events.jsonl``) go through :meth:`Session.feed`, so every view and every finding is
computed the same way in both cases. Memory is bounded for any run length: series are
thinned, lists are capped, and steps beyond the first few hundred are aggregated.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from .. import events
from ..events.payloads import (
    ByeFields,
    ChildFields,
    CutFields,
    DataLoaderFields,
    EnvFields,
    Frame,
    HelloFields,
    LeaksFields,
    MemFields,
    ModelFields,
    OpsFields,
    OtherProgram,
    OthersFields,
    OverrideFields,
    ProbeErrorFields,
    RunFields,
    StepsFields,
)
from ..redact import TEXT_KINDS, redact_argv, scrub_fields, secret_values
from .health import HealthStats
from .leaks import LeakStats
from .loaders import merge_rebuilt
from .memory import MemoryStats
from .ops import OpStats
from .steps import StepStats

MAX_WARNINGS = 200
MAX_PROBE_ERRORS = 50
MAX_RANKS = 1024
MAX_CHILDREN = 64


MAX_LOADER_RECORDS = 256
"""Constructions kept (the probe keeps its newest 256 too): a loader built every epoch of a
long run merges into one record."""


@dataclass
class DroppedWarnings:
    """Warnings past the cap of distinct messages: how many, and how often shown."""

    probe_distinct: int = 0
    probe_count: int = 0
    _own: dict[tuple[str, str], int] = field(default_factory=dict)

    def note(self, distinct: int, count: int) -> None:
        self.probe_distinct = max(self.probe_distinct, distinct)
        self.probe_count = max(self.probe_count, count)

    def own(self, key: tuple[str, str], count: int) -> None:
        if key in self._own or len(self._own) < 10_000:
            self._own[key] = max(self._own.get(key, 0), count)

    @property
    def distinct(self) -> int:
        return self.probe_distinct + len(self._own)

    @property
    def count(self) -> int:
        return self.probe_count + sum(self._own.values())

    def text(self) -> str:
        """``3 more distinct messages (shown 7 times) not kept`` or empty."""
        if not self.distinct and not self.count:
            return ""
        n, times = self.distinct, self.count
        return f"{n} more distinct message{'s' if n != 1 else ''} (shown {times} time{'s' if times != 1 else ''}) not kept"


def _count(value: Any) -> int:
    """A count from a recording (which may hold anything): a non-negative int, else 0."""
    try:
        return max(0, int(value))
    except (TypeError, ValueError, OverflowError):
        return 0


@dataclass
class WarningRecord:
    category: str
    message: str
    filename: str
    lineno: int | None
    count: int
    first_ts: float


@dataclass
class CrashInfo:
    type: str
    module: str
    message: str
    frames: list[Frame]
    ts: float

    @property
    def user_frame(self) -> Frame | None:
        """The innermost frame in the user's own code: where the fix goes."""
        for frame in reversed(self.frames):
            if frame.get("user"):
                return frame
        return self.frames[-1] if self.frames else None


@dataclass
class ExitInfo:
    returncode: int
    signal: int | None
    signal_name: str | None
    duration: float | None
    stopped_by_user: bool = False
    channel_closed_at: float | None = None
    """The event pipe ended this many seconds in while the script ran on (launcher's view)."""
    probe_done: bool | None = None
    """Whether the probe's last line (``bye``) arrived; None for older recordings."""
    bad_lines: int = 0


@dataclass
class Session:
    """The fields of the events folded here: a recording is data from disk, so whoever
    reads a field checks its value (a damaged or hand-edited file may hold anything);
    the types say what a well-formed recording holds (see events.payloads)."""

    run: RunFields = field(default_factory=lambda: RunFields())
    hello: HelloFields = field(default_factory=lambda: HelloFields())
    env: EnvFields = field(default_factory=lambda: EnvFields())
    model: ModelFields = field(default_factory=lambda: ModelFields())
    dataloaders: dict[int, DataLoaderFields] = field(default_factory=dict)
    """One per place the script builds a loader (session/loaders.py: constructions at one
    line, a loader rebuilt every epoch, merged), keyed by the first one's id."""
    loader_records: dict[int, DataLoaderFields] = field(default_factory=dict)
    """Every construction's own record, as the probe sent it."""
    steps: StepStats = field(default_factory=StepStats)
    memory: MemoryStats = field(default_factory=MemoryStats)
    warnings: dict[tuple[str, str], WarningRecord] = field(default_factory=dict)
    warnings_dropped: DroppedWarnings = field(default_factory=lambda: DroppedWarnings())
    """Distinct messages past the cap, whose texts were not kept (see probe/warnings_hook)."""
    crash: CrashInfo | None = None
    exit: ExitInfo | None = None
    probe_errors: list[ProbeErrorFields] = field(default_factory=list)
    ops: OpStats = field(default_factory=OpStats)
    leaks: LeakStats = field(default_factory=LeakStats)
    health: HealthStats = field(default_factory=HealthStats)
    """A non-finite loss, device busy time, pageable copies (``health`` events)."""
    last_ts: float = 0.0
    events_seen: int = 0
    unknown_events: int = 0
    version: int = 0
    """Bumped at every fed event batch: views redraw only when it changed."""
    children: list[ChildFields] = field(default_factory=list)
    """Processes the script started itself (multiprocessing, not DataLoader workers): the
    probe does not follow them, so their work is missing from the run."""
    children_started: int = 0
    read_back: bool = False
    """Fed from a finished recording on disk (``session.recording``), not a live run: no exit
    event then means the run ended without one (launcher killed, file cut), never "running"."""
    ranks: dict[int, Session] = field(default_factory=dict)
    """Distributed runs: one session per rank (events carry ``r``). The job session itself
    also folds rank 0's events (and the first crash of any rank), so every
    single-process view shows rank 0."""
    overrides: list[OverrideFields] = field(default_factory=list)
    """``--set`` changes the probe applied or refused (``override`` events), in order."""
    cut: CutFields | None = None
    """Set when ``--max-steps`` / ``--max-seconds`` ended the run (``cut`` event)."""
    primary_rank: int = 0
    """The rank whose figures the job-level views show (rank 0 is on the first node)."""
    bye: ByeFields | None = None
    """The probe's last line: events it dropped (``dropped``) and why (``reason``)."""
    secrets: list[str] = field(default_factory=list, repr=False)
    others: OthersFields | None = None
    """The launcher's latest reading of the busiest programs outside the training's tree."""
    """Secret argument values found in an old recording's argv, masked in later texts."""

    # -- folding ------------------------------------------------------------------
    def feed_many(self, batch: Iterable[events.Event]) -> None:
        for event in batch:
            self.feed(event)

    def feed(self, event: events.Event) -> None:
        if self.secrets and event.kind in TEXT_KINDS:  # an older recording's unmasked texts
            event = events.Event(event.kind, event.ts, scrub_fields(event.data, self.secrets))
        rank = event.data.get("r")
        if isinstance(rank, int) and not isinstance(rank, bool) and 0 <= rank < MAX_RANKS:
            sub = self.ranks.get(rank)
            if sub is None:
                if len(self.ranks) >= MAX_RANKS:
                    return
                sub = self.ranks[rank] = Session()
            sub.run = self.run
            sub._fold(event)
            if rank != self.primary_rank and not (event.kind == events.KIND_EXCEPTION and self.crash is None):
                self.events_seen += 1
                self.version += 1
                return
        self._fold(event)

    def _fold(self, event: events.Event) -> None:
        self.events_seen += 1
        self.version += 1
        kind, data = event.kind, event.data
        if event.ts > self.last_ts:
            self.last_ts = event.ts
        handler = _HANDLERS.get(kind)
        if handler is None:
            self.unknown_events += 1
            return
        try:
            handler(self, event.ts, data)
        except events.SchemaError:
            raise
        except (TypeError, ValueError, KeyError, AttributeError, OverflowError):
            # a malformed record of a known kind: count it, keep the rest of the run
            self.unknown_events += 1

    def _on_run(self, ts: float, data: dict[str, Any]) -> None:
        self.run = cast(RunFields, _strip(data))
        if "argv" in self.run:  # recordings made before argv was redacted at the source
            argv = self.run["argv"]
            if isinstance(argv, list):
                self.secrets = secret_values(argv)
            self.run["argv"] = redact_argv(argv)

    def _on_hello(self, ts: float, data: dict[str, Any]) -> None:
        events.check_schema(events.Event(events.KIND_HELLO, ts, data))
        self.hello = cast(HelloFields, _strip(data))

    def _on_env(self, ts: float, data: dict[str, Any]) -> None:
        self.env = cast(EnvFields, _strip(data))

    def _on_model(self, ts: float, data: dict[str, Any]) -> None:
        self.model = cast(ModelFields, _strip(data))

    def _on_dataloader(self, ts: float, data: dict[str, Any]) -> None:
        records = self.loader_records
        key = int(data.get("id", len(records) + 1))
        if key in records or len(records) < MAX_LOADER_RECORDS:
            records[key] = cast(DataLoaderFields, _strip(data))
            self.dataloaders = merge_rebuilt(records)

    def _on_steps(self, ts: float, data: dict[str, Any]) -> None:
        if data.get("restart") is True:
            # the steps so far were a pass without training (StepStats._start_training): the
            # samples' indices named those steps, not the training's, numbered from 0 again
            self.ops.sampled.clear()
        self.steps.feed(cast(StepsFields, data))

    def _on_mem(self, ts: float, data: dict[str, Any]) -> None:
        self.memory.feed(ts, cast(MemFields, data))

    def _on_warning(self, ts: float, data: dict[str, Any]) -> None:
        if "dropped_distinct" in data or "dropped_count" in data:  # the probe's note past its cap
            self.warnings_dropped.note(_count(data.get("dropped_distinct")), _count(data.get("dropped_count")))
            return
        key = (str(data.get("category", "")), str(data.get("message", ""))[:300])
        record = self.warnings.get(key)
        count = _count(data.get("count"))
        if record is not None:
            record.count = max(record.count, count or record.count + 1)
        elif len(self.warnings) < MAX_WARNINGS:
            self.warnings[key] = WarningRecord(
                category=key[0], message=str(data.get("message", "")), filename=str(data.get("filename", "")),
                lineno=data.get("lineno"), count=count or 1, first_ts=ts,
            )
        else:  # a recording with more than the probe keeps: say so too
            self.warnings_dropped.own(key, count or 1)

    def _on_ops(self, ts: float, data: dict[str, Any]) -> None:
        self.ops.feed(cast(OpsFields, data))

    def _on_child(self, ts: float, data: dict[str, Any]) -> None:
        self.children_started += 1
        if len(self.children) < MAX_CHILDREN:
            self.children.append(cast(ChildFields, _strip(data)))

    def _on_health(self, ts: float, data: dict[str, Any]) -> None:
        self.health.feed(data)

    def _on_leaks(self, ts: float, data: dict[str, Any]) -> None:
        self.leaks.feed(cast(LeaksFields, data))

    def _on_exception(self, ts: float, data: dict[str, Any]) -> None:
        frames = [cast(Frame, f) for f in data.get("frames") or [] if isinstance(f, dict)]
        self.crash = CrashInfo(
            type=str(data.get("type", "Exception")), module=str(data.get("module", "")),
            message=str(data.get("message", "")), frames=frames, ts=ts,
        )

    def _on_probe_error(self, ts: float, data: dict[str, Any]) -> None:
        if len(self.probe_errors) < MAX_PROBE_ERRORS:
            self.probe_errors.append(cast(ProbeErrorFields, _strip(data)))

    def _on_exit(self, ts: float, data: dict[str, Any]) -> None:
        self.exit = ExitInfo(
            returncode=int(data.get("returncode", 0)), signal=data.get("signal"),
            signal_name=data.get("signal_name"), duration=data.get("duration"),
            stopped_by_user=bool(data.get("stopped_by_user", False)),
            channel_closed_at=_number(data.get("channel_closed_at")),
            probe_done=data.get("probe_done") if isinstance(data.get("probe_done"), bool) else None,
            bad_lines=int(_number(data.get("bad_lines")) or 0),
        )
        for sub in self.ranks.values():  # the launcher's exit ends every rank's stream
            if sub.exit is None:
                sub.exit = self.exit

    def _on_others(self, ts: float, data: dict[str, Any]) -> None:
        top = [t for t in data.get("top") or [] if isinstance(t, dict) and isinstance(t.get("name"), str)
               and isinstance(t.get("cores"), (int, float))]
        self.others = OthersFields(window_s=float(_number(data.get("window_s")) or 0.0),
                                   top=[OtherProgram(name=t["name"], cores=float(t["cores"])) for t in top[:8]])

    def _on_bye(self, ts: float, data: dict[str, Any]) -> None:
        self.bye = cast(ByeFields, _strip(data))

    def _on_override(self, ts: float, data: dict[str, Any]) -> None:
        if len(self.overrides) < 64:
            self.overrides.append(cast(OverrideFields, _strip(data)))

    def _on_cut(self, ts: float, data: dict[str, Any]) -> None:
        self.cut = cast(CutFields, _strip(data))

    def _on_ranks(self, ts: float, data: dict[str, Any]) -> None:
        self.run.setdefault("ranks", _strip(data))

    # -- derived ------------------------------------------------------------------
    @property
    def framework(self) -> str | None:
        """The framework that drove the loop (probe/frameworks.py): named at the first
        optimizer step, or, in a run where none stepped (``Trainer.evaluate()`` or
        ``trainer.validate()`` alone, a crash before the first step), by the first
        DataLoader a framework iterated."""
        if self.model:
            name = self.model.get("framework")
            return name if isinstance(name, str) else None
        for _, loader in sorted(self.dataloaders.items()):  # in the order first iterated
            name = loader.get("framework")
            if isinstance(name, str):
                return name
        return None

    @property
    def device_kind(self) -> str:
        """The device the training ran on: the model's, else the best one available."""
        kind = self.model.get("device_kind")
        if kind:
            return str(kind)
        if self.env.get("mps_available"):
            return "mps"
        return "cpu"

    @property
    def status(self) -> str:
        if self.exit is None:
            return "running"
        if self.exit.stopped_by_user or self._interrupted():
            return "stopped"
        if self.exit.returncode == 0:
            return "cut" if self.cut is not None else "finished"
        return "crashed"

    def _interrupted(self) -> bool:
        """Ctrl-C at the terminal (headless): the script ended by its KeyboardInterrupt and
        died by SIGINT, as python does. The user's stop, like ``s`` in the TUI: no crash."""
        ex, crash = self.exit, self.crash
        return (ex is not None and crash is not None and crash.type == "KeyboardInterrupt"
                and (ex.signal_name == "SIGINT" or ex.returncode == -2))

    def recording_problems(self) -> list[str]:
        """Why the recording misses part of the run (empty: nothing known to be missing).

        Views say so next to the status, so 'finished, 0 steps' is never shown as the
        whole truth about a run whose events were lost."""
        problems: list[str] = []
        sessions = [(None, self)] if not self.ranks else sorted(self.ranks.items())
        for rank, sub in sessions:
            who = "" if rank is None else f" of rank {rank}"
            dropped = _number((sub.bye or {}).get("dropped"))
            if dropped:
                reason = str((sub.bye or {}).get("reason") or "the reader fell behind")
                problems.append(f"the profiler{who} dropped {int(dropped)} events ({reason})")
        exit_info = self.exit
        if exit_info is not None:
            if exit_info.channel_closed_at is not None:
                problems.append(f"the script closed mpsprof's event channel {exit_info.channel_closed_at:.1f} s "
                                "into the run: what happened after that is missing")
            elif exit_info.probe_done is False and self.hello and exit_info.signal is None:
                problems.append(_skipped_shutdown(exit_info.returncode, self.last_step_seen))
            elif exit_info.probe_done is False and self.hello:
                problems.append(_killed(exit_info.signal_name or f"signal {exit_info.signal}", self.last_step_seen))
            if exit_info.bad_lines:
                problems.append(f"{exit_info.bad_lines} event line(s) from the profiler could not be read")
        return problems

    @property
    def last_step_seen(self) -> int | None:
        """The highest step index anything in the recording names: the steps' own events,
        the op samples', the loss readings' and device timings' (None: none names one).
        A process killed mid-run loses the probe's buffered steps events while op samples
        of steps 3 and 5 did arrive: "after 0 steps" would be false, "after step 5" is what
        the recording shows."""
        health = self.health
        named = [self.steps.last_index if self.steps.count else None, self.ops.last_step,
                 _number((health.nonfinite or {}).get("step")),
                 health.loss_steps - 1 if health.loss_steps else None,
                 *(d.step for d in health.device), *(c.step for c in health.copy_time)]
        seen = [int(n) for n in named if n is not None and n >= 0]
        return max(seen) if seen else None

    @property
    def is_distributed(self) -> bool:
        return len(self.ranks) > 1

    @property
    def script(self) -> str:
        return str(self.run.get("script") or self.run.get("target") or "?")


def _lost_after(last_step: int | None) -> str:
    """Which of the probe's events a recording cut short lost: those after the highest step
    it shows, or all of its steps where none arrived."""
    return f"after step {last_step}, the last the recording shows" if last_step is not None else "all of its steps"


def _killed(signal_name: str, last_step: int | None) -> str:
    """A script killed by a signal (SIGKILL, the out-of-memory killer's; SIGSEGV) without the
    probe's last line: its buffered events (up to half a second of steps, probe/channel.py
    ``HEADLESS_INTERVAL``) died with it. Said with the last step that did arrive, so "0 steps"
    reads as what was lost, not as a script without a training loop."""
    return (f"the script was killed by {signal_name} before mpsprof's last events ({_lost_after(last_step)}) "
            "were sent, so the end of the run is missing")


def _skipped_shutdown(returncode: int | None, last_step: int | None) -> str:
    """A script that exited with no signal and without the probe's last line: it skipped
    Python's shutdown (``os._exit(N)`` after training, as scripts that avoid a slow teardown
    of worker threads do), so the atexit function that sends the probe's buffered events
    never ran. Said as that, with the last step that did arrive, so "0 steps" reads as what
    was lost, not as a loop nobody counted."""
    how = f"os._exit({returncode})" if isinstance(returncode, int) and returncode >= 0 else "os._exit()"
    return (f"the script ended without Python's normal shutdown (as {how} does, which skips atexit "
            f"functions): mpsprof's last events ({_lost_after(last_step)}) were never sent, so the end of the "
            "run is missing")


def _number(value: Any) -> float | None:
    """A recorded number, or None for anything else (a damaged or hand-edited field)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _strip(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in ("k", "ts")}


_HANDLERS = {
    events.KIND_RUN: Session._on_run,
    events.KIND_HELLO: Session._on_hello,
    events.KIND_ENV: Session._on_env,
    events.KIND_MODEL: Session._on_model,
    events.KIND_DATALOADER: Session._on_dataloader,
    events.KIND_STEPS: Session._on_steps,
    events.KIND_MEM: Session._on_mem,
    events.KIND_WARNING: Session._on_warning,
    events.KIND_OPS: Session._on_ops,
    events.KIND_EXCEPTION: Session._on_exception,
    events.KIND_PROBE_ERROR: Session._on_probe_error,
    events.KIND_EXIT: Session._on_exit,
    events.KIND_RANKS: Session._on_ranks,
    events.KIND_BYE: Session._on_bye,
    events.KIND_LEAKS: Session._on_leaks,
    events.KIND_HEALTH: Session._on_health,
    events.KIND_OVERRIDE: Session._on_override,
    events.KIND_CUT: Session._on_cut,
    events.KIND_CHILD: Session._on_child,
    events.KIND_OTHERS: Session._on_others,
}
