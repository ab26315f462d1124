"""Shared test setup: real torch on CPU, one thread (2-core machines oversubscribe).

The folders say what a test is: ``unit/`` (in this process), ``e2e/`` (real scripts through
the real CLI), ``tui/`` (the Textual pilot, snapshots, a real terminal); this directory holds
what they share (helpers, training scripts, fixtures, recordings).

Also the split between the quick tests (the README's `-m "not slow"`, under 3 minutes on
two cores) and the slow ones that CI runs with them. Each test says what it is next to
its definition: `@pytest.mark.slow` for a test that runs the real CLI for more than a few
seconds (or a module's `pytestmark = pytest.mark.slow` where every test starts real
training processes), and `@pytest.mark.serial` beside it for a slow test whose verdict
rests on measured time (stall shares, stragglers, speedups, CPU contention): a second test
running beside it on a 2-core machine would be part of what it measures. CI runs the
serial ones alone after all the others, which run two at a time (the README's quick
tests, then `-m "slow and not serial" -n 2 --dist loadgroup`, pytest-xdist: one test at a
time to whichever worker is free, a module's tests that share a module fixture together).
A test that uses a module fixture judged from measured time is serial too; one whose
module fixture runs untimed triggers is slow only.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")


def module_fixtures(item: pytest.Item) -> set[str]:
    """The module-scoped fixtures (a real run, often) the test asks for: CI's
    `--dist loadgroup` keeps such a module's tests on one worker, so each runs once."""
    info = getattr(item, "_fixtureinfo", None)
    chains = info.name2fixturedefs.items() if info is not None else ()
    return {name for name, chain in chains if any(d.scope == "module" for d in chain)}


def split_fixtures(items: list[pytest.Item]) -> list[str]:
    """Module fixtures used by serial and by other tests: CI would run them twice, once in
    each stage (make the tests that share one all serial, or give the others their own)."""
    stages: dict[tuple[str, str], set[bool]] = {}
    for item in items:
        for name in module_fixtures(item):
            stages.setdefault((item.path.name, name), set()).add(bool(item.get_closest_marker("serial")))
    return [f"{path}::{name}" for (path, name), seen in sorted(stages.items()) if len(seen) > 1]


@pytest.hookimpl(tryfirst=True)  # before -m deselects and before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    unslow = [item.nodeid for item in items if item.get_closest_marker("serial") and not item.get_closest_marker("slow")]
    if unslow:  # `-m "not slow"` would run it two at a time, and `-m "slow and serial"` never
        raise pytest.UsageError("marked serial but not slow (add @pytest.mark.slow): " + ", ".join(unslow))
    split = split_fixtures(items)
    if split:
        raise pytest.UsageError("module fixture used by serial and by other tests (it would run in both "
                                "CI stages): " + ", ".join(split))
    for item in items:
        if module_fixtures(item):
            item.add_marker(pytest.mark.xdist_group(item.path.name))
    # modules with slow tests first (a module's tests stay together, in their order): when
    # CI runs all untimed tests two at a time, the last ones are quick, no worker waits long.
    # Among those, first the modules with a shared run (xdist sends the group to one worker
    # as one unit) or a test that asks for more than the default timeout (a run of runs):
    # in the slow stage every module is slow, and alphabetical order left a 20 s TUI
    # experiment (test_tui_tryfix.py) for last, with the other worker idle beside it
    slow_modules = {item.path for item in items if item.get_closest_marker("slow")}
    try:
        default_timeout = float(config.getini("timeout") or 0)  # pyproject's, read by pytest-timeout
    except ValueError:  # pytest-timeout absent: no such ini setting
        default_timeout = 0.0
    long_modules = {item.path for item in items if module_fixtures(item) or any(
        float(m.args[0] if m.args else m.kwargs.get("timeout", 0)) > default_timeout
        for m in item.iter_markers("timeout"))}
    items.sort(key=lambda item: (item.path not in slow_modules, item.path not in long_modules))
