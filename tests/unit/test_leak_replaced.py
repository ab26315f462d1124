"""Tensors a line makes that are replaced, not kept, do not "pile up" (issue 27: a
leak-site-container warning in 1 of 15 runs of a compiled nanoGPT, from
``checkpoint = {'model': raw_model.state_dict(), ...}``, rebuilt at every evaluation).

The probe reported the line with 16 tensors alive from sampled step 18, then 16 alive
from steps 18 and 24 together: one state_dict's worth at a time. A real container leak
holds more from two steps than from one.
"""

from __future__ import annotations

from typing import Any

from mpsprofiler import events
from mpsprofiler.diagnosis import diagnose
from mpsprofiler.session.session import Session


def _session(reports: list[tuple[int, int, list[int]]]) -> Session:
    lines = [events.encode(events.KIND_HELLO, 0.0, schema=events.SCHEMA_VERSION, pid=1)]
    for k, (step, alive, steps) in enumerate(reports):
        site: dict[str, Any] = {"file": "/x/train.py", "line": 278, "module": "", "op": "aten::detach",
                                "code": "'model': raw_model.state_dict(),", "alive": alive, "bytes": alive * 7000,
                                "steps": steps, "grad": False}
        lines.append(events.encode(events.KIND_LEAKS, 10.0 + k, step=step, lag=2, sites=[site], carries=[]))
    session = Session()
    session.feed_many(events.decode(line) for line in lines)
    return session


def _facts_rules(session: Session) -> tuple[dict[str, Any], set[str]]:
    diagnosis = diagnose(session)
    return diagnosis.facts, {f.rule for f in diagnosis.findings}


def test_a_line_whose_tensors_are_replaced_is_no_leak_site() -> None:
    facts, rules = _facts_rules(_session([(20, 16, [18]), (26, 16, [18, 24])]))  # as recorded
    assert facts["leak_site_count"] == 0
    assert not {"leak-site-container", "leak-site-small"} & rules


def test_a_line_whose_tensors_are_kept_still_is() -> None:
    facts, rules = _facts_rules(_session([(20, 16, [18]), (26, 32, [18, 24])]))
    assert facts["leak_site_count"] == 1 and facts["leak_site_alive"] == 32


def test_a_site_first_reported_from_two_steps_is_judged_as_before() -> None:
    facts, _ = _facts_rules(_session([(26, 16, [18, 24])]))
    assert facts["leak_site_count"] == 1
