"""The probe options are one typed value (``launcher/options.py``): built once, copied with
changes, never mutated, and turned into the probe's JSON in one place."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from mpsprofiler.launcher.child import RunSpec
from mpsprofiler.launcher.options import ProbeOptions

REPO = Path(__file__).resolve().parents[2]


def test_wire_holds_what_differs_and_reads_back() -> None:
    options = ProbeOptions(max_steps=30, settings={"dataloader": {"num_workers": 4}}, fault=("steps",))
    wire = options.to_wire()
    assert wire == {"max_steps": 30, "settings": {"dataloader": {"num_workers": 4}}, "fault": ["steps"],
                    "ops_budget": options.ops_budget}
    assert ProbeOptions.from_wire(json.loads(json.dumps(wire))) == options
    with pytest.raises(ValueError, match="unknown probe option"):
        ProbeOptions.from_wire({"max_step": 3})


def test_options_are_copied_not_changed() -> None:
    base = ProbeOptions(no_ops=True)
    changed = base.with_changes(terminal_loan=True)
    assert base.terminal_loan is False and changed.terminal_loan is True and changed.no_ops is True
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.no_ops = False  # type: ignore[misc]
    assert RunSpec(target="x.py").options == ProbeOptions()


def test_settings_are_read_only_and_the_options_still_pickle_and_copy() -> None:
    import copy
    import pickle

    given = {"dataloader": {"num_workers": 2}}
    options = ProbeOptions(settings=given, fault=("memory",), max_steps=5)
    given["dataloader"]["num_workers"] = 8  # the caller's dict changes later: the options do not
    assert options.settings["dataloader"] == {"num_workers": 2}
    with pytest.raises(TypeError):
        options.settings["env"] = {}  # type: ignore[index]
    for copied in (pickle.loads(pickle.dumps(options)), copy.deepcopy(options), copy.copy(options)):
        assert copied == options and copied.to_wire() == options.to_wire()


def test_every_option_the_probe_reads_is_a_field() -> None:
    """The probe reads ``MPSPROF_OPTIONS`` as JSON (it cannot import the launcher): each name it
    reads must be a field here, so an option added on one side only fails this test."""
    fields = {f.name for f in dataclasses.fields(ProbeOptions)}
    read: set[str] = set()
    for path in (REPO / "mpsprofiler" / "probe").glob("*.py"):
        read |= set(re.findall(r"options\.get\(\s*[\"'](\w+)[\"']", path.read_text(encoding="utf-8")))
    assert read, "the probe reads no option? the pattern no longer matches its code"
    assert read <= fields, sorted(read - fields)


def test_one_default_ops_budget_leaves_room_in_the_goal_for_the_rest_of_the_probe() -> None:
    """The command line, the options and an accountant built without one take the same
    default, and it is under the product's goal of 0.5% added time at >= 5 ms steps: op
    accounting is one part of what the probe adds (probe/ops_schedule.py DEFAULT_BUDGET)."""
    import inspect

    from mpsprofiler.cli import build_parser
    from mpsprofiler.probe.ops import OpAccountant
    from mpsprofiler.probe.ops_schedule import DEFAULT_BUDGET

    args = build_parser("run").parse_args(["run", "--headless", "train.py"])
    assert args.ops_budget == ProbeOptions().ops_budget == DEFAULT_BUDGET
    assert inspect.signature(OpAccountant).parameters["budget"].default == DEFAULT_BUDGET
    assert DEFAULT_BUDGET < 0.005
