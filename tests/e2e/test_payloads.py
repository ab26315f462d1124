"""The typed event fields (mpsprofiler/events/payloads.py) match what is on the wire.

mypy checks the code that builds and reads the records; these tests check the data: every
field of a real recording is a field of its kind's TypedDict, and the tables that read
records by field name (the TUI's Data and Environment panels, the reports' loader table)
name fields that exist. A field added to the probe without its type fails here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helpers import mpsprof_cli
from mpsprofiler.events import payloads

REPO = Path(__file__).resolve().parents[2]
RECORDINGS = sorted((REPO / "tests" / "fixtures" / "recordings").glob("*/events.jsonl"))

FIELDS_OF: dict[str, Any] = {
    "hello": payloads.HelloFields, "run": payloads.RunFields, "env": payloads.EnvFields,
    "model": payloads.ModelFields, "dataloader": payloads.DataLoaderFields, "steps": payloads.StepsFields,
    "mem": payloads.MemFields, "warning": payloads.WarningFields, "ops": payloads.OpsFields,
    "exception": payloads.ExceptionFields, "probe_error": payloads.ProbeErrorFields, "exit": payloads.ExitFields,
    "bye": payloads.ByeFields, "leaks": payloads.LeaksFields, "override": payloads.OverrideFields,
    "cut": payloads.CutFields, "child": payloads.ChildFields, "others": payloads.OthersFields, "terminal": payloads.TerminalFields,
    "health": payloads.HealthFields,
}
COMMON = {"k", "ts", "r"}


def _keys(typed: Any) -> set[str]:
    return set(typed.__required_keys__ | typed.__optional_keys__)


def untyped_fields(lines: list[str]) -> set[tuple[str, str]]:
    """(kind, field) of every field a TypedDict does not name, nested steps.agg and frames included."""
    found: set[tuple[str, str]] = set()
    for line in lines:
        record = json.loads(line)
        kind = record["k"]
        if kind == "ranks":  # an older launcher's event, folded into the run record
            continue
        typed = FIELDS_OF.get(kind)
        if typed is None:
            found.add((kind, "(kind)"))
            continue
        found |= {(kind, f) for f in set(record) - COMMON - _keys(typed)}
        if kind == "steps" and isinstance(record.get("agg"), dict):
            found |= {("steps.agg", f) for f in set(record["agg"]) - _keys(payloads.StepAggregate)}
        for frame in record.get("frames") or [] if kind == "exception" else []:
            found |= {("exception.frames", f) for f in set(frame) - _keys(payloads.Frame)}
    return found


def test_every_kind_has_its_fields_typed() -> None:
    from mpsprofiler import events

    assert set(FIELDS_OF) == set(events.ALL_KINDS) - {events.KIND_RANKS}


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda p: p.parent.name)
def test_recorded_fields_are_typed(recording: Path) -> None:
    found = untyped_fields(recording.read_text().splitlines())
    assert not found, f"fields without a type in events/payloads.py: {sorted(found)}"


@pytest.mark.slow
def test_a_fresh_recording_has_only_typed_fields(tmp_path: Path) -> None:
    """A run with an override, an op-accounting sample, a leak and a warning: their fields too."""
    run = tmp_path / "run"
    proc = mpsprof_cli("run", "--headless", "-o", str(run), "--set", "torch.num_threads=1",
                       str(REPO / "tests" / "scripts_leaks" / "total_loss.py"))
    assert proc.returncode == 0, proc.stderr
    lines = (run / "events.jsonl").read_text().splitlines()
    kinds = {json.loads(line)["k"] for line in lines}
    assert {"override", "ops", "leaks", "steps", "mem", "model", "env"} <= kinds
    found = untyped_fields(lines)
    assert not found, f"fields without a type in events/payloads.py: {sorted(found)}"
    # the probe packs its steps' rows on the pipe (events/step_rows.py): the recording holds columns
    steps = [json.loads(line) for line in lines if json.loads(line)["k"] == "steps"]
    assert steps and not any({"rows", "origin", "agg_rows"} & set(s) for s in steps)
    assert sum(len(s["i"]) for s in steps) > 0 and all(len(s["dur"]) == len(s["i"]) for s in steps)


def test_tables_read_by_field_name_name_real_fields() -> None:
    """mypy cannot check a field name held in a table; these tables name fields that exist."""
    from mpsprofiler.report.common import DATALOADER_KEYS
    from mpsprofiler.tui.widgets.data import LOADER_FIELDS
    from mpsprofiler.tui.widgets.environment import ENV_ROWS

    loader = _keys(payloads.DataLoaderFields)
    assert set(DATALOADER_KEYS) <= loader
    assert {key for key, _ in LOADER_FIELDS} <= loader
    assert {key for key, _ in ENV_ROWS} <= _keys(payloads.EnvFields)
