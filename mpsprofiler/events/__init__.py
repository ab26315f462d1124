"""The wire format between the probe (child) and the launcher (parent).

Every record is one JSON object on one line with two common keys:

* ``k``: the kind of event (one of the ``KIND_*`` constants below);
* ``ts``: seconds on the probe's monotonic clock since the probe started.

Events carry plain JSON values only, so a recording (``events.jsonl``) is readable by
any tool and replays through the same session code as a live run. The schema is
versioned: readers accept older versions with tolerant defaults and refuse newer
major versions with a clear message (see :func:`check_schema`).

Nothing else lives here: no I/O policy, no state. That keeps the format the one
thing the probe, the launcher, the session and external tools share. The fields of
each kind are typed in :mod:`.payloads`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

SCHEMA_VERSION = 1
"""Bumped when a change would make old readers misread new recordings."""

# -- kinds ---------------------------------------------------------------------
KIND_HELLO = "hello"  # first event: schema, pid, rank, probe start wall time
KIND_RUN = "run"  # written by the launcher: script, argv, cwd, mode, run dir
KIND_ENV = "env"  # environment facts (versions, chip, cores, PYTORCH_* vars)
KIND_MODEL = "model"  # device / dtype / parameter count of a model seen stepping
KIND_DATALOADER = "dataloader"  # one DataLoader's configuration
KIND_STEPS = "steps"  # a batch of steps, columnar (see StepBatch)
KIND_MEM = "mem"  # a memory / CPU sample
KIND_WARNING = "warning"  # a Python warning raised inside the script
KIND_OPS = "ops"  # op accounting of one sampled step (issue: CPU fallback)
KIND_EXCEPTION = "exception"  # an uncaught exception of the script
KIND_PROBE_ERROR = "probe_error"  # an instrument failed and was switched off
KIND_EXIT = "exit"  # written by the launcher: how the child ended
KIND_RANKS = "ranks"  # distributed: world size and the ranks of the job
KIND_BYE = "bye"  # the probe's last line: nothing follows; events it dropped, and why
KIND_LEAKS = "leaks"  # tensors outliving their step, by the line that made them
KIND_OVERRIDE = "override"  # a --set change applied (or refused) inside the script
KIND_CUT = "cut"  # the run reached --max-steps / --max-seconds and was ended cleanly
KIND_CHILD = "child"  # a process the script started (not a DataLoader worker), not followed
KIND_HEALTH = "health"  # training health (a non-finite loss) and device busy time (see session/health)
KIND_OTHERS = "others"  # written by the launcher: the busiest programs outside the training's tree
KIND_TERMINAL = "terminal"  # control, never recorded: the script wants the terminal (TUI), or is done

ALL_KINDS = frozenset(
    {
        KIND_HELLO,
        KIND_CHILD,
        KIND_RUN,
        KIND_ENV,
        KIND_MODEL,
        KIND_DATALOADER,
        KIND_STEPS,
        KIND_MEM,
        KIND_WARNING,
        KIND_OPS,
        KIND_EXCEPTION,
        KIND_PROBE_ERROR,
        KIND_EXIT,
        KIND_RANKS,
        KIND_BYE,
        KIND_LEAKS,
        KIND_OVERRIDE,
        KIND_CUT,
        KIND_HEALTH,
        KIND_OTHERS,
        KIND_TERMINAL,
    }
)


class SchemaError(ValueError):
    """A recording that this version of mpsprof cannot read."""


@dataclass(frozen=True)
class Event:
    """One decoded record. ``data`` keeps every field, known or not."""

    kind: str
    ts: float
    data: dict[str, Any]

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)


def json_safe(value: Any) -> Any:
    """Make a value JSON-safe: NaN/inf become None (JSON has no such numbers), so every
    document mpsprof writes (events, summary.json, JSON and trace reports) is valid JSON
    whatever a damaged recording fed into its arithmetic."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


_clean = json_safe


def encode(kind: str, ts: float, **fields: Any) -> bytes:
    """One event as a newline-terminated UTF-8 JSON line."""
    record = {"k": kind, "ts": round(ts, 6)}
    record.update(fields)
    try:
        text = json.dumps(record, separators=(",", ":"), allow_nan=False)
    except ValueError:
        text = json.dumps(_clean(record), separators=(",", ":"), allow_nan=False)
    return text.encode("utf-8", "replace") + b"\n"


MAX_INT = 1 << 63
"""Integers beyond 64 bits are no field of ours: read as None, like non-finite numbers."""


def _no_constant(name: str) -> None:
    return None  # NaN, Infinity, -Infinity: not JSON; the encoder writes them as null


def _finite_float(text: str) -> float | None:
    value = float(text)
    return value if math.isfinite(value) else None  # 1e999


def _bounded_int(text: str) -> int | None:
    value = int(text)
    return value if -MAX_INT <= value < MAX_INT else None


def decode(line: bytes | str) -> Event:
    """Decode one line; raises ValueError for anything that is not a valid event.

    Numbers the encoder never writes (NaN, infinities, integers past 64 bits) are read
    as None, as :func:`encode` would have written them, so a damaged or hand-edited
    recording cannot feed an overflow into the session's arithmetic. A ``steps`` event
    whose rows the probe packed (:mod:`.step_rows`) is read with its columns."""
    return _decode(line)[0]


def decode_wire(line: bytes) -> tuple[Event, bytes]:
    """Decode one line from the probe; returns the event and the line to record: the one
    received, or, for a ``steps`` event with packed rows, the line with its columns (the
    line the probe wrote before it packed them, see :mod:`.step_rows`)."""
    event, unfolded = _decode(line)
    if unfolded:
        line = json.dumps(event.data, separators=(",", ":"), allow_nan=False).encode("utf-8", "replace")
    return event, line


def _decode(line: bytes | str) -> tuple[Event, bool]:
    if isinstance(line, bytes):
        line = line.decode("utf-8", "replace")
    try:
        record = json.loads(line, parse_constant=_no_constant, parse_float=_finite_float, parse_int=_bounded_int)
    except RecursionError:  # a damaged or hostile line nested thousands deep
        raise ValueError("event is nested too deeply") from None
    if not isinstance(record, dict):
        raise ValueError("event is not a JSON object")
    kind = record.get("k")
    if not isinstance(kind, str) or not kind:
        raise ValueError("event has no kind")
    ts = record.get("ts", 0.0)
    if not isinstance(ts, (int, float)) or isinstance(ts, bool):
        raise ValueError("event timestamp is not a number")  # NaN and 1e999 arrive as None
    unfolded = kind == KIND_STEPS and "rows" in record
    if unfolded:
        from .step_rows import unfold

        try:
            record = unfold(record)
        except (TypeError, KeyError, OverflowError) as exc:
            raise ValueError(f"packed steps are damaged: {exc}") from None
    return Event(kind=kind, ts=float(ts), data=record), unfolded


def check_schema(hello: Event) -> None:
    """Refuse a recording from a newer, incompatible schema with a clear message."""
    version = hello.get("schema", 1)
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise SchemaError(
            f"this recording uses event schema {version!r}; this mpsprof reads "
            f"schema {SCHEMA_VERSION} and older. Upgrade mpsprof to read it."
        )


@dataclass
class DecodeReport:
    """What a tolerant read skipped, so views can say so instead of failing."""

    lines: int = 0
    skipped: int = 0
    first_bad_line: int | None = None
    truncated_tail: bool = False
    oversize: int = 0
    """Lines skipped unread for their length (the reader caps it)."""

    def describe(self) -> str:
        if not self.skipped and not self.truncated_tail and not self.oversize:
            return ""
        parts = []
        if self.oversize:
            parts.append(f"skipped {self.oversize} line(s) too long to be events (over 8 MiB)")
        if self.skipped:
            parts.append(
                f"skipped {self.skipped} unreadable line(s) of {self.lines}"
                f" (first at line {self.first_bad_line})"
            )
        if self.truncated_tail:
            parts.append("the last line was cut off (the run ended mid-write)")
        return "; ".join(parts)


def decode_lines(lines: Iterable[bytes | str], report: DecodeReport | None = None) -> Iterator[Event]:
    """Decode many lines, skipping bad ones and counting them in ``report``."""
    report = report if report is not None else DecodeReport()
    for number, line in enumerate(lines, start=1):
        report.lines = number
        stripped = line.strip()
        ends = line.endswith(b"\n") if isinstance(line, bytes) else line.endswith("\n")
        if not stripped:
            continue
        try:
            event = decode(stripped)
        except ValueError:  # UnicodeDecodeError and JSONDecodeError included
            if not ends:
                report.truncated_tail = True
            else:
                report.skipped += 1
                if report.first_bad_line is None:
                    report.first_bad_line = number
            continue
        yield event


# -- step batches --------------------------------------------------------------
STEP_COLUMNS = ("i", "end", "dur", "wait", "batches", "idle", "alloc")
STEP_PHASE_COLUMNS = ("pre", "bwd")
"""Optional columns (older recordings lack them): ``pre``: seconds from the step's start
to its first backward pass (data wait, forward and the script's own code); ``bwd``:
seconds inside backward passes (in DDP, waiting for the other ranks' gradients too).
None in steps without a backward pass."""
"""Columns of a ``steps`` event, each a list of the same length:

* ``i``: step index (0-based); ``end``: probe time at the step's end;
* ``dur``: wall seconds of the step; ``wait``: seconds blocked in DataLoader ``__next__``;
* ``batches``: DataLoader batches consumed; ``idle``: 1 if the device had finished the
  previous step's work when the host began waiting for data, 0 if it was still busy,
  None when unknown or not asynchronous;
* ``alloc``: device bytes held by tensors at the step's end (None on CPU).

A ``steps`` event may also carry ``agg``: exact aggregates of steps that were not
sent one by one (long runs, and runs of very fast steps, decimate detail: the
recording stays bounded and the live view folds fewer records):
``{"n", "dur_sum", "wait_sum", "dur_min", "dur_max", "i_last", "hist"}`` where
``hist`` maps log-bucket indices (see :func:`bucket_of`) to counts, plus (newer
recordings) ``idle_n`` / ``busy_n`` and ``end_last`` (see ``StepAggregate``).
"""

STEP_LOADER_COLUMNS = ("wait_cpu", "wait_runq")
"""Optional columns of a ``steps`` event (older recordings lack them; readers default to
None): CPU seconds the waiting thread itself spent inside DataLoader ``__next__``
(``wait_cpu``: building the batch for ``num_workers=0``, receiving it from a worker
otherwise) and seconds it was ready to run but waited for a free core (``wait_runq``,
Linux only, from ``/proc/thread-self/schedstat``). With ``wait`` they tell a loader
that computes from one that waits for I/O and from one that waits for a CPU core.
``agg`` then also carries ``wait_cpu_sum`` and ``wait_runq_sum``.
"""

# (re-exported: the probe, the session and the views read them here)
from .buckets import BUCKETS_PER_DECADE as BUCKETS_PER_DECADE  # noqa: E402
from .buckets import bucket_of as bucket_of  # noqa: E402
from .buckets import bucket_value as bucket_value  # noqa: E402
