"""Reading a run recording back into a Session, tolerantly.

A recording cut off by a crash, or with damaged lines, is read up to what is valid and
the reader says what it skipped. A recording from a newer schema is refused with a
clear message rather than misread.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from .. import events
from ..rundir import EVENTS_FILE
from ..rundir import open_regular as open_regular  # the one guarded opener (the log panel imports it here)
from .session import Session


class RecordingError(Exception):
    """A path that holds no readable recording."""


@dataclass
class LoadedRun:
    session: Session
    report: events.DecodeReport
    run_dir: Path

    @property
    def notes(self) -> str:
        return self.report.describe()


def events_path(path: Path) -> Path:
    """Accept a run directory or the events file itself."""
    path = Path(path)
    if path.is_dir():
        candidate = path / EVENTS_FILE
        if not candidate.exists():
            raise RecordingError(f"{path} is not an mpsprof run directory (no {EVENTS_FILE} in it)")
        return candidate
    if not path.exists():
        raise RecordingError(f"no such run directory: {path}")
    return path


MAX_LINE_BYTES = 8 * 1024 * 1024
"""No event is this long (the largest, an ops table, is tens of KB): longer lines are
skipped and counted, read in bounded chunks, so a damaged file cannot exhaust memory."""


def bounded_lines(fh: BinaryIO, report: events.DecodeReport, limit: int = MAX_LINE_BYTES) -> Iterator[bytes]:
    """The lines of ``fh``; a line over ``limit`` bytes is read past in chunks, never held
    whole, and counted in ``report.oversize`` (yielded as an empty line, so line numbers
    still count it)."""
    while True:
        line = fh.readline(limit + 1)
        if not line:
            return
        if len(line) > limit and not line.endswith(b"\n"):
            while line and not line.endswith(b"\n"):
                line = fh.readline(1 << 20)
            report.oversize += 1
            yield b"\n"
            continue
        yield line


def iter_recording(path: Path, report: events.DecodeReport) -> list[events.Event]:
    file = events_path(path)
    try:
        with open_regular(file) as fh:
            return list(events.decode_lines(bounded_lines(fh, report), report))
    except OSError as exc:
        raise RecordingError(f"cannot read {file}: {exc.strerror or exc}") from exc


def load_run(path: Path) -> LoadedRun:
    report = events.DecodeReport()
    evs = iter_recording(path, report)
    if not evs:
        raise RecordingError(f"{events_path(path)} holds no readable events")
    session = Session(read_back=True)
    session.feed_many(evs)
    return LoadedRun(session=session, report=report, run_dir=_run_dir(path))


def _run_dir(path: Path) -> Path:
    """The run directory of a recording given as its directory or its events file."""
    return Path(path) if Path(path).is_dir() else Path(path).parent


def load_runs(paths: list[Path]) -> LoadedRun:
    """One session from several recordings: the nodes of a multi-node job.

    Each node's ``mpsprof run --nnodes N --node-rank K`` records its own ranks; their
    events carry global ranks, so feeding them all into one session gives the job view.
    The first recording's ``run`` event describes the job; the worst exit ends it.
    """
    if len(paths) == 1:
        return load_run(paths[0])
    report = events.DecodeReport()
    session = Session(read_back=True)
    exits: list[events.Event] = []
    for n, path in enumerate(paths):
        for event in iter_recording(path, report):
            if event.kind == events.KIND_EXIT:
                exits.append(event)
            elif event.kind == events.KIND_RUN and n > 0:
                continue
            else:
                session.feed(event)
    if exits:
        session.feed(max(exits, key=_exit_severity))
    if not session.events_seen:
        raise RecordingError("the recordings hold no readable events")
    return LoadedRun(session=session, report=report, run_dir=_run_dir(paths[0]))


def _exit_severity(event: events.Event) -> float:
    """How bad an exit is, for picking the worst node's: ``|returncode|``; a damaged
    value (text, a float that is no integer, NaN) counts as 0, never raises."""
    code = event.get("returncode", 0)
    if isinstance(code, bool) or not isinstance(code, (int, float)) or code != code:
        return 0.0
    return float(min(abs(code), 1e9))
