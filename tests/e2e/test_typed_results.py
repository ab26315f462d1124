"""The typed seam above the session cannot drift from the run document.

``mpsprofiler.results`` types what the views read (:class:`Summary` and its sections,
:class:`Document`, :class:`ExperimentResult`; :class:`FindingDoc` in
``diagnosis/findings.py``). These tests hold those types to the contract
(``mpsprofiler/report/schema.json``, docs/report-schema.md) and to what a real run writes
(``summary.json`` of a ``mpsprof run --headless`` on a tiny script), and to what
``mpsprof try`` stores (``Trial.result``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_type_hints

import pytest

from helpers import mpsprof_cli
from mpsprofiler.diagnosis.findings import Finding, FindingDoc
from mpsprofiler.experiment.trial import RunOutcome, Target, Trial, TrialConfig
from mpsprofiler.report.json_report import load_schema
from mpsprofiler.results import (
    CrashDoc,
    DeviceDoc,
    Document,
    ExitDoc,
    ExperimentResult,
    MemoryDoc,
    OpsCostDoc,
    RecordingDoc,
    StepsDoc,
    Summary,
)

SECTIONS: dict[str, Any] = {"exit": ExitDoc, "device": DeviceDoc, "steps": StepsDoc, "memory": MemoryDoc,
                            "crash": CrashDoc, "recording": RecordingDoc}
"""Summary keys whose value is an object with a type of its own."""
ONLY_WHEN_MEASURED = {"ops", "ranks"}
"""Summary keys a run writes only when it has them (op accounting, a distributed run)."""
DOCUMENT_ONLY = {"mpsprof", "experiments"}
"""Document keys only ``report --format json`` (``mpsprof``) or a tried run (``experiments``) has."""

SCRIPT = """\
import torch
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(6):
    opt.zero_grad()
    model(torch.randn(8, 4)).sum().backward()
    opt.step()
"""


def keys(typed: Any) -> set[str]:
    return set(get_type_hints(typed))


def _props(node: dict[str, Any]) -> set[str]:
    """Property names of a schema object, through a ``oneOf`` with null."""
    for option in node.get("oneOf", [node]):
        if "properties" in option:
            return set(option["properties"])
    return set()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``summary.json`` of a real headless run of a tiny training loop."""
    root = tmp_path_factory.mktemp("typed")
    (root / "tiny.py").write_text(SCRIPT)
    out = root / "run"
    done = mpsprof_cli("run", "--headless", "-o", str(out), "tiny.py", cwd=root)
    assert done.returncode == 0, done.stderr
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return summary


def test_the_types_name_every_key_of_the_schema() -> None:
    schema = load_schema()
    top = set(schema["properties"])
    assert top <= keys(Document), top - keys(Document)
    assert set(schema["required"]) <= keys(Document)
    for name, typed in SECTIONS.items():
        assert _props(schema["properties"][name]) <= keys(typed), (name, _props(schema["properties"][name]) - keys(typed))
    assert set(schema["$defs"]["finding"]["properties"]) <= keys(FindingDoc)
    assert set(schema["$defs"]["finding"]["required"]) <= FindingDoc.__required_keys__


def test_the_types_are_what_a_recorded_run_writes(recorded: dict[str, Any]) -> None:
    """Every key a run writes is typed, and every typed key a run always has is written."""
    written = set(recorded)
    assert written <= keys(Document), written - keys(Document)
    assert keys(Document) - DOCUMENT_ONLY - ONLY_WHEN_MEASURED <= written, keys(Document) - written
    assert Summary.__required_keys__ <= written
    for name, typed in SECTIONS.items():
        value = recorded[name]
        if value is None:  # exit on a crash-free run is present; crash is None here
            assert name == "crash", name
            continue
        assert set(value) == keys(typed), (name, set(value) ^ keys(typed))


def test_findings_and_their_documents_have_the_same_keys(recorded: dict[str, Any]) -> None:
    doc = Finding("r", "warning", "t", "e", "f").to_dict()
    assert set(doc) == FindingDoc.__required_keys__
    assert set(Finding("r", "info", "t", "e", "f", provisional=True).to_dict()) == keys(FindingDoc)
    for finding in recorded["findings"]:
        assert set(finding) == FindingDoc.__required_keys__, set(finding) ^ FindingDoc.__required_keys__


def test_op_accounting_cost_is_typed(recorded: dict[str, Any]) -> None:
    if "ops" in recorded:  # sampled steps on this run: the keys the type names
        assert set(recorded["ops"]) == keys(OpsCostDoc)


def test_an_experiment_result_has_the_typed_keys(tmp_path: Path) -> None:
    """``Trial.result`` (what ``experiments.json`` stores) against :class:`ExperimentResult`."""
    trial = Trial(Target("train.py"), {"dataloader.num_workers": 4}, tmp_path, TrialConfig(pairs=2, steps=10),
                  rule="dataloader-stall")
    trial.outcomes = [RunOutcome(arm, pair, None, "cut", 0, median, 8, 10, 100, None, 1.0)
                      for pair in (1, 2, 3) for arm, median in (("A", 0.02 + pair * 1e-4), ("B", 0.01))]
    result = trial.result(12.0)
    assert set(result) <= keys(ExperimentResult), set(result) - keys(ExperimentResult)
    core = ExperimentResult.__required_keys__ | {"runs", "verdict", "headline"}
    assert core <= set(result), core - set(result)
    assert set(result["memory"]) == {"a_peak_rss", "b_peak_rss", "a_peak_device", "b_peak_device"}
