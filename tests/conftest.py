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
module fixture runs untimed triggers is slow only. A run that tests of several modules
read is a session fixture here (a shared run): its tests get one xdist group (joined with
their modules' groups where they have module fixtures), so it runs once, and they must be
all serial or all not.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.helpers import Recorded

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def sleepy_loader_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real recording of sleepy_loader.py (``--max-steps 30``, SLEEPY_LOADER_ENV) with
    its stall finding, shared by the TUI tests that try (test_tui_tryfix.py) and prove
    (test_patch_tui_prove.py) that finding's fix: each copies it into its own tmp_path, so
    each stores its one experiment in its own run."""
    from tests.helpers import REPO, SLEEPY_LOADER_ENV, child_env, mpsprof_cli

    run = tmp_path_factory.mktemp("sleepy_loader") / "run"
    proc = mpsprof_cli("run", "--headless", "-o", str(run), "--max-steps", "30",
                       str(REPO / "tests" / "scripts_try" / "sleepy_loader.py"), env=child_env(**SLEEPY_LOADER_ENV),
                       timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return run


@pytest.fixture(scope="session")
def flat_loader_recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """tests/scripts_patch/flat_loader.py (a stalling loader built at module level, no
    ``__main__`` guard) copied and recorded once with ``--max-steps 30``, for the patches
    made over it: the stall fix read as a Mac's (test_patch.py) and pageable-copies'
    ``pin_memory=True`` (test_patch_unplanned.py). Each writes only its own
    ``fix-<rule>.patch`` into the run and leaves the script as recorded."""
    from tests.helpers import REPO, Recorded

    return Recorded(tmp_path_factory.mktemp("flat"), REPO / "tests" / "scripts_patch" / "flat_loader.py",
                    "--max-steps", "30")


@pytest.fixture(scope="session")
def library_loader_recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """tests/scripts_patch/library_loader.py, whose stalling DataLoader is built in a library
    outside the script's directory (tests/scripts_patch/lib on PYTHONPATH), copied and
    recorded once with ``--max-steps 30``: neither its stall fix (test_patch.py) nor
    pageable-copies' (test_patch_unplanned.py) may patch that library."""
    from tests.helpers import REPO, Recorded, child_env

    scripts = REPO / "tests" / "scripts_patch"
    env = child_env()
    env["PYTHONPATH"] = f"{scripts / 'lib'}:{env['PYTHONPATH']}"
    return Recorded(tmp_path_factory.mktemp("library"), scripts / "library_loader.py", "--max-steps", "30", env=env)


@pytest.fixture(scope="session")
def spawn_bootstrap_recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """examples/triggers/spawn_bootstrap.py (spawned DataLoader workers, no ``__main__``
    guard: it crashes on purpose) copied and recorded once: the trigger's own check
    (test_rules_shipped.py, the ``untimed_runs`` fixture) and its patch, made, applied and
    proven (test_patch.py). Judged from the crash message, not from time: not serial."""
    from tests.helpers import REPO, Recorded, child_env

    return Recorded(tmp_path_factory.mktemp("spawn"), REPO / "examples" / "triggers" / "spawn_bootstrap.py",
                    env=child_env(MKL_NUM_THREADS="1", ML_DEVICE=None))


@pytest.fixture(scope="session")
def worker_respawn_recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """examples/triggers/worker_respawn.py (its loader's 2 workers start again every epoch)
    copied and recorded once: the trigger's own check (test_rules_shipped.py, the ``runs``
    fixture) and its patch, applied and profiled again (test_patch_loader_rules.py). The
    finding is judged from the workers' start-up share of the epochs, so its tests are all
    serial; it records alone, before the other timed triggers."""
    from tests.helpers import REPO, Recorded, child_env

    return Recorded(tmp_path_factory.mktemp("respawn"), REPO / "examples" / "triggers" / "worker_respawn.py",
                    env=child_env(MKL_NUM_THREADS="1", ML_DEVICE=None))


def module_fixtures(item: pytest.Item) -> set[str]:
    """The module-scoped fixtures (a real run, often) the test asks for: CI's
    `--dist loadgroup` keeps such a module's tests on one worker, so each runs once."""
    info = getattr(item, "_fixtureinfo", None)
    chains = info.name2fixturedefs.items() if info is not None else ()
    return {name for name, chain in chains if any(d.scope == "module" for d in chain)}


def shared_fixtures(item: pytest.Item) -> set[str]:
    """The session-scoped runs of this file (above) the test asks for: one real run that
    tests of several modules read. Like a module fixture, it runs once only where all its
    tests go to one worker (a group of their own, or joined with their modules' groups)."""
    info = getattr(item, "_fixtureinfo", None)
    chains = info.name2fixturedefs.items() if info is not None else ()
    return {name for name, chain in chains
            if any(d.scope == "session" and getattr(getattr(d, "func", None), "__module__", None) == __name__
                   for d in chain)}


def run_groups(items: list[pytest.Item]) -> dict[str, str]:
    """The xdist group of each test that reads a shared run (nodeid -> group): a module
    with a module fixture is one group (its file name); a shared run joins the groups of
    all its tests, and a test of no such module then goes to the shared run's own."""
    parent: dict[str, str] = {}

    def root(key: str) -> str:
        while parent.setdefault(key, key) != key:
            key = parent[key]
        return key

    keys = {item.nodeid: ([item.path.name] if module_fixtures(item) else []) + sorted(shared_fixtures(item))
            for item in items}
    for first, *others in (k for k in keys.values() if k):
        for other in others:
            a, b = root(first), root(other)
            if a != b:
                parent[max(a, b)] = min(a, b)  # the smallest name stands for the group: the same on every worker
    return {nodeid: root(k[0]) for nodeid, k in keys.items() if k}


def split_fixtures(items: list[pytest.Item]) -> list[str]:
    """Module fixtures (and shared runs) used by serial and by other tests: CI would run them
    twice, once in each stage (make the tests that share one all serial, or give the others
    their own)."""
    stages: dict[tuple[str, str], set[bool]] = {}
    for item in items:
        for path, name in [(item.path.name, n) for n in module_fixtures(item)] + [("", n) for n in shared_fixtures(item)]:
            stages.setdefault((path, name), set()).add(bool(item.get_closest_marker("serial")))
    return [f"{path}::{name}" if path else name for (path, name), seen in sorted(stages.items()) if len(seen) > 1]


@pytest.hookimpl(tryfirst=True)  # before -m deselects and before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    unslow = [item.nodeid for item in items if item.get_closest_marker("serial") and not item.get_closest_marker("slow")]
    if unslow:  # `-m "not slow"` would run it two at a time, and `-m "slow and serial"` never
        raise pytest.UsageError("marked serial but not slow (add @pytest.mark.slow): " + ", ".join(unslow))
    split = split_fixtures(items)
    if split:
        raise pytest.UsageError("module fixture or shared run used by serial and by other tests (it would run "
                                "in both CI stages): " + ", ".join(split))
    groups = run_groups(items)
    for item in items:
        if item.nodeid in groups:
            item.add_marker(pytest.mark.xdist_group(groups[item.nodeid]))
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
    long_modules = {item.path for item in items if item.nodeid in groups or any(
        float(m.args[0] if m.args else m.kwargs.get("timeout", 0)) > default_timeout
        for m in item.iter_markers("timeout"))}
    items.sort(key=lambda item: (item.path not in slow_modules, item.path not in long_modules))


_ENVIRONMENT_OWN = ("PYTEST_CURRENT_TEST", "TORCHINDUCTOR_", "PYTORCH_NVML_BASED_CUDA_CHECK")
"""Set by pytest itself, by torch.compile for its own cache (inductor's cache dir), and by
``import lightning`` in a test that imports it (lightning_fabric sets the NVML check)."""


@pytest.fixture(autouse=True)
def _environment_left_as_found(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that changes os.environ for good fails here, its change undone: the variables
    the product reads in-process (the MPS watermark ratios, the fallback switch, mpsprof's
    own) then decided the results of whichever tests came after it on the same worker (a
    prelude run by exec set PYTORCH_MPS_HIGH_WATERMARK_RATIO for the rest of a worker's tests,
    which failed one of them in some xdist orders only)."""
    before = dict(os.environ)
    yield
    after = dict(os.environ)
    if after == before:
        return
    changed = sorted(k for k in before.keys() | after.keys()
                     if before.get(k) != after.get(k) and not k.startswith(_ENVIRONMENT_OWN))
    if not changed:
        return
    for name in changed:
        if name in before:
            os.environ[name] = before[name]
        else:
            del os.environ[name]
    pytest.fail(f"{request.node.nodeid} left os.environ changed: {changed}", pytrace=False)
