"""The DataLoader wrapper's own frame for a steady batch (``probe/fetch_path.py``) records what
the tracker's general path (``StepTracker.on_fetch_start``/``on_fetch_end``,
``LoaderSites.on_fetch``) records, float for float.

Why: the wrapper repeats those methods' operations inline (issue 34: a batch in one Python
frame), so a change to the fetch clock's schedule or estimate must be made in both places
(session 61: the read after a long wait moved from ``LONG_FETCH`` to ``READ_AFTER``). The
random sequences of ``benchmarks/fetch_path_equality.py`` (short and long fetches, waits past
``READ_AFTER``, runs past ``EXACT_FETCHES``, passes that end, optimizer steps, several
loaders) drive one tracker through the wrapper and another through the methods; the closed
steps' rows and the events must be the same, bit for bit."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import mpsprofiler
from mpsprofiler.probe import cputime

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import fetch_path_equality  # noqa: E402  (the benchmark's sequences and comparison)


@pytest.mark.parametrize("seed", range(40))
def test_the_wrapper_s_steady_batches_record_what_the_methods_record(seed: int) -> None:
    steps, _ = fetch_path_equality.run(seed, mpsprofiler, mpsprofiler, wrappers=(False, True))
    assert steps > 0


def test_the_comparison_tells_a_wrapper_that_reads_after_another_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sequences reach the read after a long wait: a wrapper that reads the next fetch
    after every ``LONG_FETCH`` (the schedule before session 61) differs from the methods."""
    from mpsprofiler.probe import fetch_path

    monkeypatch.setattr(fetch_path, "READ_AFTER", cputime.LONG_FETCH)
    failed = 0
    for seed in range(40):
        try:
            fetch_path_equality.run(seed, mpsprofiler, mpsprofiler, wrappers=(False, True))
        except AssertionError:
            failed += 1
    assert failed > 0
