"""Shared test setup: real torch on CPU, one thread (2-core machines oversubscribe).

Also the split between the quick tests (the README's `-m "not slow"`, under 3 minutes on
two cores) and the slow ones that CI runs with them. Whole modules and test functions
that start many processes (spawn workers, distributed ranks, live TUI runs, every
rule's trigger script, fault injection) are marked here, in one place, so a new test in
those modules is slow by default; other tests mark themselves `@pytest.mark.slow`.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

SLOW_MODULES = frozenset({"test_conformance.py", "test_faults.py", "test_distributed.py"})
"""Every test here starts real training processes under hostile conditions: minutes in all."""

SLOW_FUNCTIONS = frozenset({
    "test_trigger_script_fires_its_rule",  # every rule's trigger script through the CLI
    "test_live_run_stop_key",  # live TUI runs wait on real processes and signals
    "test_live_quit_asks_then_stops_the_script",
    "test_live_torchrun_ranks_and_stop_key",
    "test_fail_on_uses_the_findings_severity",  # --fail-on: three full runs each
    "test_fail_on_warning_fails_a_data_loader_stall",
    "test_fail_on_warning_passes_a_clean_run",
    "test_crashed_script_keeps_its_own_status_despite_fail_on",
    "test_spawn_workers",  # spawn-started workers re-import torch
    "test_data_wait_matches_the_sleeps",  # timed sleeps: wants a quiet machine
})

SLOW_FIXTURES = frozenset({"runs", "untimed_runs"})
"""test_rules_shipped's module fixtures run every trigger script: their users are slow too."""

SERIAL_MODULES = frozenset({
    "test_experiment_try.py",  # A/B speedups and their intervals
    "test_loader_advice.py",  # wait shares, CPU contention, worker counts from measured times
    "test_provisional.py",  # the first finding of a live run, before it is confirmed
})  # (not test_tui_tryfix.py: the `t` key test asserts no verdict, only that one is shown and stored)
SERIAL_FIXTURES = frozenset({
    "runs",  # test_rules_shipped: trigger and clean scripts of the stall, respawn and warm-up rules
    "straggler_run",  # test_distributed: stragglers named from per-rank times
})
"""Module fixtures whose runs are judged from measured time: their users run alone."""
SERIAL_FUNCTIONS = frozenset({
    "test_data_wait_matches_the_sleeps",
    "test_ddp_straggler_in_its_own_code_is_named_with_the_phase",
    "test_fail_on_uses_the_findings_severity",
    "test_fail_on_warning_fails_a_data_loader_stall",
    "test_fail_on_warning_passes_a_clean_run",
    "test_a_very_long_compiled_first_step_gets_the_warm_up_note",
    "test_parent_stopped_does_not_block_training",
})
"""Slow tests whose verdict rests on measured time (stall shares, stragglers, speedups, CPU
contention): a second test running beside them on a 2-core machine would be part of what
they measure. CI runs them alone after all the others, which run two at a time
(the README's quick tests, then `-m "slow and not serial" -n 2 --dist loadgroup`,
pytest-xdist: one test at a time to whichever worker is free, a module's tests that share
a module fixture together)."""
UNTIMED_FUNCTIONS = frozenset({
    # judged from CPU times (the workers' per batch against the training's), which a busy
    # machine does not change; its stall only grows when others take CPU from the workers
    "test_cpu_bound_workers_are_told_the_core_limit",
    # asserts a false finding is absent and that a live diagnosis ran: both hold however
    # slowly the script runs (the rule is judged at the end; the script mostly sleeps)
    "test_live_run_does_not_show_no_steps_while_steps_come",
})
"""Slow tests in a SERIAL_MODULES module whose verdict rests on no measured time: they run
two at a time with the others."""


def uses_a_module_fixture(item: pytest.Item) -> bool:
    """Whether the test asks for a module-scoped fixture (a real run, often): CI's
    `--dist loadgroup` keeps such a module's tests on one worker, so the fixture runs once."""
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs.values() if info is not None else ()
    return any(d.scope == "module" for chain in defs for d in chain)


@pytest.hookimpl(tryfirst=True)  # before -m deselects and before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if uses_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.path.name))
        name = getattr(item, "originalname", None) or item.name.split("[")[0]
        uses_slow_fixture = bool(SLOW_FIXTURES & set(getattr(item, "fixturenames", ())))
        if item.path.name in SLOW_MODULES or name in SLOW_FUNCTIONS or uses_slow_fixture:
            item.add_marker(pytest.mark.slow)
        uses_serial_fixture = bool(SERIAL_FIXTURES & set(getattr(item, "fixturenames", ())))
        timed_module = item.path.name in SERIAL_MODULES and name not in UNTIMED_FUNCTIONS
        if timed_module or name in SERIAL_FUNCTIONS or uses_serial_fixture:
            item.add_marker(pytest.mark.serial)
    # modules with slow tests first (a module's tests stay together, in their order): when
    # CI runs all untimed tests two at a time, the last ones are quick, no worker waits long
    slow_modules = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_modules)
