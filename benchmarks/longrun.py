"""A synthetic 1,000,000-step run through the probe's step tracker, the recorder and the
session: the parent's memory and the recording's size must stay bounded.

The stream is made the way the probe makes it: the real :class:`StepTracker` (fed by
DataLoader fetches and optimizer steps on a fake clock) and the real probe's drain
policy (every 0.25 s, then every ``AGGREGATE_EVERY`` s once only aggregates are sent),
memory samples on the sampler's schedule (0.5 s, then 2 s after ten minutes) and a
repeated warning reported with the warnings hook's counts. The parent side is the
launcher's: decode each line, write it to a real :class:`Recorder`, fold the batch
into a :class:`Session`.

    python benchmarks/longrun.py [--steps 1000000] [--step-ms 50]

Prints a table of figures at checkpoints (copied into ``benchmarks/RESULTS.md``).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil  # noqa: E402

from mpsprofiler import events  # noqa: E402
from mpsprofiler.devices.cpu import CpuBackend  # noqa: E402
from mpsprofiler.launcher.recorder import Recorder  # noqa: E402
from mpsprofiler.probe import probe as probe_mod  # noqa: E402
from mpsprofiler.probe import sampler as sampler_mod  # noqa: E402
from mpsprofiler.probe.probe import Probe  # noqa: E402
from mpsprofiler.probe.steps import StepTracker  # noqa: E402
from mpsprofiler.session.session import Session  # noqa: E402

FLUSH_INTERVAL = 0.25  # the channel thread's period (Channel(interval=0.25))
PARENT_FILES = ("*/mpsprofiler/session/*", "*/mpsprofiler/launcher/*", "*/mpsprofiler/events/*")


class ListChannel:
    """Stands in for the pipe: collects encoded lines; the flush callbacks are the probe's."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.flushers: list[Callable[[], None]] = []
        self.dropped = 0
        self.closed = False

    def send(self, line: bytes) -> None:
        self.lines.append(line)

    def on_flush(self, fn: Callable[[], None]) -> None:
        self.flushers.append(fn)

    def flush(self) -> list[bytes]:
        for fn in self.flushers:
            fn()
        out, self.lines = self.lines, []
        return out


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def parent_bytes() -> int:
    """Bytes held by allocations made in the parent's code (session, launcher, events)."""
    snap = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, p) for p in PARENT_FILES])
    return sum(stat.size for stat in snap.statistics("filename"))


def run(steps: int, step_ms: float, checkpoints: int, use_tracemalloc: bool, seed: int = 1) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    mem_rng = random.Random(seed + 1)
    clock = FakeClock()
    channel = ListChannel()
    probe = Probe(channel, {})  # not installed: no hooks, only its emit and drain policy
    probe.clock = clock
    probe.tracker = StepTracker(probe.emit, CpuBackend(), clock)
    channel.on_flush(probe._drain_steps)
    tracker = probe.tracker
    optimizer = object()

    tmp = tempfile.TemporaryDirectory(prefix="mpsprof-longrun-")
    run_dir = Path(tmp.name)
    recorder = Recorder(run_dir)
    session = Session()
    process = psutil.Process()
    if use_tracemalloc:
        tracemalloc.start()

    def deliver(lines: list[bytes]) -> None:  # RunController._read_loop, minus the pipe
        batch = []
        for line in lines:
            event = events.decode(line.rstrip(b"\n"))
            recorder.write(line)
            batch.append(event)
        if batch:
            session.feed_many(batch)
        recorder.maybe_flush()

    probe.emit(events.KIND_HELLO, schema=events.SCHEMA_VERSION, pid=os.getpid(), wall=time.time())
    next_flush = FLUSH_INTERVAL
    next_mem = 0.0
    warn_count = 0
    rows: list[dict[str, Any]] = []
    every = max(1, steps // checkpoints)
    started = time.perf_counter()
    mean = step_ms / 1000.0
    for i in range(steps):
        # one step: wait for the batch, compute, optimizer step (log-normal durations)
        wait = mean * 0.2 * rng.lognormvariate(0, 0.3)
        work = mean * 0.8 * rng.lognormvariate(0, 0.15)
        t0 = tracker.on_fetch_start()
        clock.now += wait
        tracker.on_fetch_end(t0, True)
        clock.now += work
        tracker.on_optimizer_step(optimizer)
        if i % 1000 == 999:  # a warning the script repeats: the hook sends counts 1, 10, 100, ...
            warn_count += 1
            if warn_count in (1, 10, 100, 1000) or warn_count % 10000 == 0:
                probe.emit(events.KIND_WARNING, category="UserWarning", message="the same warning",
                           filename="train.py", lineno=42, count=warn_count)
        while clock.now >= next_mem:
            probe.emit(events.KIND_MEM, rss=900_000_000 + mem_rng.randrange(1 << 20), rss_children=0, workers=0,
                       sys_available=8 << 30, sys_total=16 << 30, swap_used=0, cpu_pct=97.5)
            slow = clock.now >= sampler_mod.SLOW_AFTER
            next_mem += sampler_mod.SLOW_INTERVAL if slow else sampler_mod.FAST_INTERVAL
        if clock.now >= next_flush:
            deliver(channel.flush())
            next_flush = clock.now + FLUSH_INTERVAL
        if (i + 1) % every == 0 or i + 1 == steps:
            rows.append(checkpoint(i + 1, session, recorder, run_dir, process, started, use_tracemalloc))
    tracker.finish()
    deliver(channel.flush())
    probe._last_drain = -math.inf
    tracker.drain()
    deliver(channel.flush())
    recorder.close()
    final = rows[-1]
    final["session_steps"] = session.steps.count
    final["p50_session"] = session.steps.quantile(0.5)
    final["p50_true"] = true_median(steps, mean, seed)  # regenerated: no memory held during the run
    final["events_on_disk"] = sum(1 for _ in open(run_dir / "events.jsonl", "rb"))
    if use_tracemalloc:
        tracemalloc.stop()
    tmp.cleanup()
    return rows


def true_median(steps: int, mean: float, seed: int) -> float:
    """The exact median of the simulated step times, from the same random sequence."""
    from array import array

    rng = random.Random(seed)
    values = array("d", bytes(8 * steps))
    for i in range(steps):
        values[i] = mean * 0.2 * rng.lognormvariate(0, 0.3) + mean * 0.8 * rng.lognormvariate(0, 0.15)
    return statistics.median(values)


def checkpoint(step: int, session: Session, recorder: Recorder, run_dir: Path, process: psutil.Process,
               started: float, use_tracemalloc: bool) -> dict[str, Any]:
    recorder.flush()
    row: dict[str, Any] = {
        "steps": step,
        "rss_mb": process.memory_info().rss / 2**20,
        "recording_mb": (run_dir / "events.jsonl").stat().st_size / 2**20,
        "events": session.events_seen,
        "seconds": time.perf_counter() - started,
    }
    if use_tracemalloc:
        row["parent_kb"] = parent_bytes() / 1024
        row["traced_peak_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--step-ms", type=float, default=50.0, help="mean simulated step time (ms)")
    parser.add_argument("--checkpoints", type=int, default=5)
    parser.add_argument("--aggregate-every", type=float, default=probe_mod.AGGREGATE_EVERY,
                        help="seconds between aggregate steps events (the probe's setting; 0.25 = every flush)")
    parser.add_argument("--no-tracemalloc", action="store_true", help="faster; RSS figures only")
    args = parser.parse_args()
    probe_mod.AGGREGATE_EVERY = args.aggregate_every
    rows = run(args.steps, args.step_ms, args.checkpoints, not args.no_tracemalloc)
    cols = ["steps", "events", "recording_mb", "rss_mb", "parent_kb", "traced_peak_mb", "seconds"]
    cols = [c for c in cols if c in rows[0]]
    print(f"simulated step {args.step_ms} ms: {args.steps * args.step_ms / 3.6e6:.1f} h of training; "
          f"aggregates sent every {args.aggregate_every} s")
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for row in rows:
        print("| " + " | ".join(_fmt(row[c]) for c in cols) + " |")
    final = rows[-1]
    print(f"session step count {final['session_steps']:,}; events on disk {final['events_on_disk']:,}; "
          f"steady p50 {final['p50_session'] * 1e3:.2f} ms (true {final['p50_true'] * 1e3:.2f} ms)")


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.1f}"
    return f"{value:,}"


if __name__ == "__main__":
    main()
