"""The sampler's swap figure (probe/sampler.py ``_swap_used``): psutil's ``used``, read from
``/proc/meminfo`` alone on Linux (psutil also parses ``/proc/vmstat`` for counts the
sampler never sends), and psutil's own elsewhere."""

from __future__ import annotations

import os

import psutil
import pytest

from mpsprofiler.probe.sampler import _swap_used


@pytest.mark.skipif(not os.path.exists("/proc/meminfo"), reason="Linux /proc")
def test_the_swap_in_use_is_psutils_figure() -> None:
    for _ in range(5):  # a machine that swaps meanwhile moves both readings: read again
        ours, theirs = _swap_used(psutil), psutil.swap_memory().used
        if ours == theirs:
            break
    assert ours == theirs


def test_without_proc_meminfo_psutil_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    real_open = open

    def no_meminfo(path: object, *args: object, **kwargs: object) -> object:
        if path == "/proc/meminfo":
            raise FileNotFoundError(path)
        return real_open(path, *args, **kwargs)  # type: ignore[call-overload]

    class FakePsutil:
        @staticmethod
        def swap_memory() -> object:
            return type("Swap", (), {"used": 12345})()

    monkeypatch.setattr("builtins.open", no_meminfo)
    assert _swap_used(FakePsutil) == 12345
