"""The DataLoader table's "Start method" column (reports and the TUI's Data panel).

A loader with workers and no ``multiprocessing_context`` of its own starts them the way the
script fixed for the process (``multiprocessing.set_start_method``), else the platform's
default; the table showed "–" there, as if they started no way at all. The default is read
from the running Python (``multiprocessing.get_start_method`` on this platform), not written
into the test.
"""

from __future__ import annotations

import multiprocessing
import sys

from mpsprofiler.report.common import dataloader_table, start_method_text
from tests.unit.test_analyzers import LINUX_ENV, MAC_ENV, build_session, loader


def _column(session) -> list[str]:  # type: ignore[no-untyped-def]
    table = dataloader_table(session)
    assert table is not None
    at = table.columns.index("Start method")
    return [row[at] for row in table.rows]


def test_workers_without_a_context_show_the_platform_default() -> None:
    here = {**LINUX_ENV, "platform": sys.platform, "python": ".".join(map(str, sys.version_info[:3]))}
    session = build_session(env=here, loaders=[loader(num_workers=2)])
    expected = multiprocessing.get_context().get_start_method()
    assert start_method_text(session, session.dataloaders[1]) == f"{expected} (default)"
    assert _column(session) == [f"{expected} (default)"]


def test_a_mac_run_shows_spawn_the_scripts_own_method_and_the_loaders_own_context() -> None:
    mac = build_session(env=MAC_ENV, loaders=[loader(num_workers=2)])
    assert _column(mac) == ["spawn (default)"]
    fixed = build_session(env=LINUX_ENV, loaders=[loader(num_workers=2, start_method_set="spawn")])
    assert _column(fixed) == ["spawn (set by the script)"]
    own = build_session(env=LINUX_ENV, loaders=[loader(num_workers=2, multiprocessing_context="forkserver")])
    assert _column(own) == ["forkserver"]


def test_a_loader_without_workers_has_no_start_method() -> None:
    session = build_session(env=LINUX_ENV, loaders=[loader(num_workers=0)])
    assert start_method_text(session, session.dataloaders[1]) is None
