"""The one registry of analyzers: each declares its name and the facts it provides.

Facts are flat (name -> number, string, bool, list of strings or None) because rules refer to
them by name. Declaring them makes the facts namespace checkable: two analyzers providing the
same fact would make the result depend on their order (the later one silently won), so a second
claim on a fact is refused when the analyzer registers (:class:`DuplicateFact`), at import time,
in every test run. Adding an analyzer = one module with an ``@analyzer(...)`` function, plus its
name in the import list of :mod:`mpsprofiler.diagnosis.analyzers`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ...session.session import Session

AnalyzerFn = Callable[[Session], dict[str, Any]]

RESERVED_FACTS = frozenset({"device_kind", "analyzer_errors"})
"""Facts set by :func:`mpsprofiler.diagnosis.facts.collect_facts` itself."""


class DuplicateFact(ValueError):
    """Two analyzers declare the same fact (or one declares a reserved one)."""


@dataclass(frozen=True)
class Analyzer:
    """A registered analyzer: ``fn(session)`` returns a subset of ``provides``."""

    name: str
    fn: AnalyzerFn
    provides: frozenset[str]


ANALYZERS: list[Analyzer] = []
"""In registration order, which is the order facts are collected in."""


def register(entry: Analyzer, registry: list[Analyzer] | None = None) -> Analyzer:
    """Add ``entry``; raise :class:`DuplicateFact` if a fact or the name is claimed already."""
    registry = ANALYZERS if registry is None else registry
    reserved = entry.provides & RESERVED_FACTS
    if reserved:
        raise DuplicateFact(f"analyzer '{entry.name}' declares reserved facts {sorted(reserved)}")
    for other in registry:
        if other.name == entry.name:
            raise DuplicateFact(f"two analyzers are named '{entry.name}'")
        both = other.provides & entry.provides
        if both:
            raise DuplicateFact(f"analyzers '{other.name}' and '{entry.name}' both provide {sorted(both)}")
    registry.append(entry)
    return entry


def analyzer(name: str, provides: Iterable[str]) -> Callable[[AnalyzerFn], AnalyzerFn]:
    """Register the decorated function as analyzer ``name`` providing the facts ``provides``."""

    def decorate(fn: AnalyzerFn) -> AnalyzerFn:
        register(Analyzer(name, fn, frozenset(provides)))
        return fn

    return decorate


def provider_of(fact: str, registry: Iterable[Analyzer] | None = None) -> str | None:
    """The name of the analyzer that provides ``fact`` (None: no analyzer does)."""
    return next((a.name for a in (ANALYZERS if registry is None else registry) if fact in a.provides), None)
