"""The registry of analyzers: each maps a session to a dict of named facts.

Facts are flat (name -> number, string, bool, list of strings or None) because rules
refer to them by name in their conditions and templates. An analyzer that fails is
skipped (its facts are missing, so its rules do not fire) and the failure is itself a
fact, so a bug in one analyzer never hides the others' findings.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..session.session import Session

Analyzer = Callable[[Session], dict[str, Any]]

ANALYZERS: list[tuple[str, Analyzer]] = []


def analyzer(name: str) -> Callable[[Analyzer], Analyzer]:
    def register(fn: Analyzer) -> Analyzer:
        ANALYZERS.append((name, fn))
        return fn

    return register


def collect_facts(session: Session) -> dict[str, Any]:
    _load_builtin_analyzers()
    facts: dict[str, Any] = {"device_kind": session.device_kind}
    failed = []
    for name, fn in ANALYZERS:
        try:
            facts.update(fn(session))
        except Exception as exc:  # noqa: BLE001 - one analyzer must not hide the others
            failed.append(f"{name}: {type(exc).__name__}: {exc}")
    facts["analyzer_errors"] = failed
    return facts


_LOADED = False


def _load_builtin_analyzers() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    from . import analyzers  # noqa: F401 - registers on import
