"""Reading a run recording back into a Session, tolerantly.

A recording cut off by a crash, or with damaged lines, is read up to what is valid and
the reader says what it skipped. A recording from a newer schema is refused with a
clear message rather than misread.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .. import events
from ..launcher.recorder import EVENTS_FILE
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


def iter_recording(path: Path, report: events.DecodeReport) -> list[events.Event]:
    file = events_path(path)
    try:
        with open(file, "rb") as fh:
            return list(events.decode_lines(fh, report))
    except OSError as exc:
        raise RecordingError(f"cannot read {file}: {exc.strerror or exc}") from exc


def load_run(path: Path) -> LoadedRun:
    report = events.DecodeReport()
    evs = iter_recording(path, report)
    if not evs:
        raise RecordingError(f"{events_path(path)} holds no readable events")
    session = Session()
    session.feed_many(evs)
    run_dir = Path(path) if Path(path).is_dir() else Path(path).parent
    return LoadedRun(session=session, report=report, run_dir=run_dir)
