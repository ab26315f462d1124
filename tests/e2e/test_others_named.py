"""memory-taken-by-others names the other program and its size, as ``top`` would (issue 27).

The probe's sampler reads the largest other processes only while memory is short
(mpsprofiler/probe/others.py); the memory analyzer quotes them at the tightest such sample.
"""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

from mpsprofiler import events
from mpsprofiler.diagnosis import diagnose
from mpsprofiler.probe.others import largest_others
from tests.unit.test_analyzers import GIB, MIB, build_session, facts_of, mem_event, step_rows


def test_largest_others_finds_a_big_process_and_never_the_run_itself() -> None:
    """A real process holding 300 MiB is listed with its name, pid and size; the caller's
    own pids (the run and its workers) never are."""
    code = "b = bytearray(300 << 20); b[::4096] = b'x' * len(b[::4096]); import time; time.sleep(60)"
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 30
        while psutil.Process(child.pid).memory_info().rss < 300 * MIB and time.monotonic() < deadline:
            time.sleep(0.1)
        rows = largest_others(psutil, {psutil.Process().pid}, top=100_000)
        assert rows == sorted(rows, key=lambda r: -r[2])
        mine = [r for r in rows if r[1] == child.pid]
        assert mine and mine[0][0].startswith("python") and mine[0][2] >= 300 * MIB
        assert psutil.Process().pid not in {r[1] for r in rows}
        assert child.pid not in {r[1] for r in largest_others(psutil, {child.pid}, top=100_000)}
    finally:
        child.kill()
        child.wait()


def _mem(ts: float, rss: int, available: int, others: list[list[object]] | None) -> bytes:
    if others is None:
        return mem_event(ts, rss, available=available)
    fields = {"rss": rss, "rss_children": 0, "workers": 0, "sys_available": available, "sys_total": 16 * GIB,
              "swap_used": 0, "cpu_pct": 100.0, "others": others}
    return events.encode(events.KIND_MEM, ts, **fields)


def test_the_finding_names_the_largest_other_program_at_the_tightest_moment() -> None:
    rows = step_rows([0.2] * 30)
    mem = []
    for k, row in enumerate(rows):
        available = 8000 * MIB
        others = None
        if k == 12:
            available, others = 900 * MIB, [["chrome", 77, 3 * GIB]]
        if k == 17:  # the tightest: a 9 GiB python process
            available, others = 200 * MIB, [["python3", 4242, int(9.2 * GIB)], ["chrome", 77, 800 * MIB]]
        mem.append(_mem(row[1], 492 * MIB, available, others))
    session = build_session(rows=rows, mem=mem)
    f = facts_of(session)
    assert f["memory_others_largest"] == "python3 (pid 4242)" and f["memory_others_largest_mib"] == 9420.8
    assert f["memory_others_top"] == "python3 (pid 4242) 9.2 GiB, chrome (pid 77) 800 MiB"
    found = {x.rule: x for x in diagnose(session).findings}
    assert "memory-pressure" not in found
    assert "as `top` lists them: python3 (pid 4242) 9.2 GiB, chrome (pid 77) 800 MiB." in (
        " ".join(found["memory-taken-by-others"].evidence.split()))


def test_without_a_reading_the_sentence_is_left_out() -> None:
    """An older recording (or a scan that failed): the finding still says what it knows."""
    rows = step_rows([0.2] * 30)
    mem = [_mem(row[1], 492 * MIB, 200 * MIB if k == 17 else 8000 * MIB, None) for k, row in enumerate(rows)]
    session = build_session(rows=rows, mem=mem)
    assert "memory_others_top" not in facts_of(session)
    text = {x.rule: x for x in diagnose(session).findings}["memory-taken-by-others"].evidence
    assert "top" not in text and "{" not in text and "?" not in text


class _ShortOfMemory:
    """psutil as the sampler sees it, but with 2% of memory available."""

    def __init__(self) -> None:
        self.scans = 0

    def __getattr__(self, name: str) -> object:
        return getattr(psutil, name)

    def virtual_memory(self) -> object:
        real = psutil.virtual_memory()
        return type("VM", (), {"total": real.total, "available": real.total // 50})()

    def process_iter(self, attrs: list[str]) -> object:
        self.scans += 1
        return psutil.process_iter(attrs)


def test_the_sampler_reads_the_others_only_while_memory_is_short_and_at_most_every_5_s() -> None:
    from mpsprofiler.probe import others
    from mpsprofiler.probe.sampler import MemorySampler

    sent: list[dict[str, object]] = []
    sampler = MemorySampler(lambda kind, **fields: sent.append(fields), lambda: None, time.monotonic,  # type: ignore[arg-type,return-value]
                            lambda exc: None)
    sampler.sample()
    assert "others" not in sent[-1]  # this machine has memory to spare
    short = _ShortOfMemory()
    sampler._psutil = short
    sampler._meminfo = False  # system memory from psutil, not /proc/meminfo (Linux)
    sampler.sample()
    sampler.sample()
    assert short.scans == 1 and others.EVERY >= 5
    rows = sent[-2]["others"]
    assert isinstance(rows, list) and rows and psutil.Process().pid not in {r[1] for r in rows}
    assert "others" not in sent[-1]
