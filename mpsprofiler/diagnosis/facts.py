"""Collecting facts: run every registered analyzer over a session and merge their facts.

An analyzer that fails is skipped (its facts are missing, so its rules do not fire) and the
failure is itself a fact, so a bug in one analyzer never hides the others' findings. The
analyzers and the facts each provides are registered in :mod:`.analyzers.registry`.
"""

from __future__ import annotations

from typing import Any

from ..session.session import Session


def collect_facts(session: Session) -> dict[str, Any]:
    from .analyzers import ANALYZERS  # importing the package registers the builtin analyzers

    facts: dict[str, Any] = {"device_kind": session.device_kind}
    failed = []
    for entry in ANALYZERS:
        try:
            facts.update(entry.fn(session))
        except Exception as exc:  # noqa: BLE001 - one analyzer must not hide the others
            failed.append(f"{entry.name}: {type(exc).__name__}: {exc}")
    facts["analyzer_errors"] = failed
    if session.probe_errors:  # a dead instrument's facts are no basis for a rule (see instruments)
        from .instruments import dead_analyzers, drop_dead_facts

        dead = dead_analyzers(session.probe_errors, session.steps.mode)
        drop_dead_facts(facts, {a.name: a.provides for a in ANALYZERS}, dead)
    return facts
