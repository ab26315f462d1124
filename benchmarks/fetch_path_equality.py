"""The DataLoader path of two versions gives the same figures: random fetch sequences, compared.

Why: a change that makes the per-batch path cheaper (issue 34) must not move a figure
the findings read. This drives two versions' step trackers (``steps.StepTracker``: the
fetch start/end, the fetch clock's schedule and estimate) and per-loader sums
(``loader_sites.LoaderSites``) with the same random sequences, on scripted clocks, and
compares what they record: the closed steps' rows, the ``steps`` and ``dataloader``
events, exactly (floats bit for bit). A version with ``probe/fetch_path.py`` is driven
through its DataLoader wrapper (``fetch_wrapper``, over a scripted ``orig_next``): its
steady batches' own frame is compared with the methods the other version calls.

Where a version folds the per-loader sums later (``LoaderSites.fold``: the channel thread,
at its wakes) its ``dataloader`` events come at the folds, not at the batches: the sequence
folds at random points, as the channel thread would, and each kind's events are compared in
their own order (the ``steps`` events, the ``dataloader`` events).

The sequences (200 to 1,500 events, so past the first ``cputime.EXACT_FETCHES`` fetches at
times) mix short and long fetches (``cputime.LONG_FETCH``, and waits past
``cputime.READ_AFTER``, after which the next fetch is read), fetches with and
without a run-queue reading, passes that end (StopIteration), optimizer steps, backward
passes (a loop without an optimizer), several loaders and iterators at once, persistent
iterators' new passes, and the index draws the per-loader sums time.

    OMP_NUM_THREADS=1 python benchmarks/fetch_path_equality.py --baseline /tmp/old/mpsprofiler
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import inspect
import os
import random
import shutil
import sys
import tempfile
import time
import types
from typing import Any


def load(folder: str, name: str) -> types.ModuleType:
    """``folder`` (an ``mpsprofiler`` package) imported as ``name``; the copy is removed at exit
    (the modules are loaded by then)."""
    root = tempfile.mkdtemp(prefix="fetch-equality-")
    atexit.register(shutil.rmtree, root, True)
    shutil.copytree(folder, os.path.join(root, name), ignore=shutil.ignore_patterns("__pycache__"))
    sys.path.insert(0, root)
    return importlib.import_module(name)


class ScriptedThreadClock:
    """The training thread's CPU and run-queue clocks, moved by the sequence."""

    def __init__(self, runq: bool) -> None:
        self.cpu_s = 0.0
        self.runq_s = 0.0
        self.has_runq = runq

    def read(self, now: float) -> tuple[float, float | None]:
        return self.cpu_s, (self.runq_s if self.has_runq else None)

    def cpu(self) -> float:
        return self.cpu_s

    def close(self) -> None:
        pass


class Iterator:
    """A DataLoader iterator as the per-loader sums see it (``_next_index``: torch's)."""

    def __init__(self) -> None:
        self._num_yielded = 0

    def _next_index(self) -> int:
        return 0


class Version:
    """One version's tracker and loader sums, fed the same sequence as the other's."""

    def __init__(self, package: types.ModuleType, runq: bool, wrapper: bool = True) -> None:
        steps = importlib.import_module(package.__name__ + ".probe.steps")
        sites_mod = importlib.import_module(package.__name__ + ".probe.loader_sites")
        cputime = importlib.import_module(package.__name__ + ".probe.cputime")
        cpu = importlib.import_module(package.__name__ + ".devices.cpu")
        self.now = 0.0
        self.events: list[tuple[str, dict[str, Any]]] = []
        try:  # a version that packs its steps' rows: the events as their reader gets them
            as_read = importlib.import_module(package.__name__ + ".events.step_rows").as_read
        except (ImportError, AttributeError):
            as_read = dict
        self.tracker = steps.StepTracker(lambda kind, **f: self.events.append((kind, as_read(f))), cpu.CpuBackend(),
                                         lambda: self.now, detail_limit=600)
        self.clock = ScriptedThreadClock(runq)
        self.tracker._thread_clock = self.clock
        self.tracker._fetch_clock = cputime.FetchClock(self.clock)
        self.sites = sites_mod.LoaderSites(lambda d: self.events.append(("dataloader", dict(d))),
                                           lambda: self.tracker.begun)
        self.site_cls = sites_mod.Site
        # the steps begun passed by the DataLoader hook (as it does) where on_fetch takes them
        self.passes_step = "step" in inspect.signature(sites_mod.LoaderSites.on_fetch).parameters
        self.loaders: list[Any] = []
        self.iters: list[Iterator] = []
        self.rows: list[tuple[Any, ...]] = []
        self.fetch: tuple[float, float, float, bool, Any] = (0.0, 0.0, 0.0, True, None)
        """The fetch the scripted ``orig_next`` makes next: wall seconds, CPU share, run-queue
        share, whether a batch comes, the batch."""
        self.next: Any = None
        """The version's DataLoader wrapper (``fetch_path.fetch_wrapper``: the steady batches'
        own frame) over the scripted ``orig_next``, where it has one; else its tracker's and
        loader sums' methods are called as the wrapper of older versions did (or, with
        ``wrapper`` False, as the wrapper's general path does: what its own frame must equal)."""
        if not wrapper:
            return
        try:
            fetch_path = importlib.import_module(package.__name__ + ".probe.fetch_path")
        except ImportError:
            return

        def fail(name: str, exc: BaseException) -> None:
            raise exc  # a failure of the path is a failure of the comparison

        self.next = fetch_path.fetch_wrapper(self.tracker, self.sites, types.SimpleNamespace(open=False),
                                             self.orig_next, frozenset(), None, fail, None,
                                             lambda: self.now + 1e-7, lambda frame: "")

    def orig_next(self, it: Iterator) -> Any:
        """The scripted ``_BaseDataLoaderIter.__next__``: the clocks move, a batch comes or not."""
        wall, share, rq, got, batch = self.fetch
        self.now += wall
        self.clock.cpu_s += wall * share
        self.clock.runq_s += wall * rq
        if not got:
            raise StopIteration
        it._num_yielded += 1
        return batch


def run(seed: int, old: types.ModuleType, new: types.ModuleType,
        wrappers: tuple[bool, bool] = (True, True)) -> tuple[int, int]:
    """One random sequence through both versions; returns the steps and events compared.
    ``wrappers``: per version, whether its DataLoader wrapper is driven (where it has one)
    or its methods (``tests/unit/test_fetch_path.py``: one version, both ways)."""
    rng = random.Random(seed)
    runq = rng.random() < 0.7
    versions = [Version(old, runq, wrappers[0]), Version(new, runq, wrappers[1])]
    ticks = [0.0]

    def fake_perf_counter() -> float:  # the index timers' clock: the same in both
        ticks[0] += 1e-6
        return ticks[0]

    real = time.perf_counter
    time.perf_counter = fake_perf_counter  # type: ignore[assignment]
    try:
        optimizers = [object(), object()][: rng.choice((0, 1, 2))]
        n_loaders = rng.choice((1, 1, 2, 3))
        for v in versions:
            for k in range(n_loaders):
                loader = type("Loader", (), {})()
                v.sites._sites[loader] = v.site_cls(k + 1, "train.py", 10 + k)
                v.loaders.append(loader)
        long_share = rng.choice((0.0, 0.05, 0.3))
        # the fetches' CPU share: waiting, mixed, or computing (over 1 at times: clock granularity)
        low, high = rng.choice(((0.0, 0.2), (0.0, 1.1), (0.8, 1.3)))
        for _ in range(rng.randint(200, 1500)):
            r = rng.random()
            if r < 0.03 or not versions[0].iters:  # a new iterator (a pass), fields at the first one
                k = rng.randrange(n_loaders)
                fields = {"created": k + 1} if rng.random() < 0.8 else None
                for v in versions:
                    it = Iterator()
                    v.iters.append(it)
                    v.sites.on_iter(it, v.loaders[k], fields)
                continue
            if r < 0.05:  # a persistent iterator's new pass
                i = rng.randrange(len(versions[0].iters))
                for v in versions:
                    v.iters[i]._num_yielded = 0
                continue
            if r < 0.15 and optimizers:
                opt = rng.choice(optimizers)
                gap = rng.uniform(1e-5, 2e-3)
                for v in versions:
                    v.now += gap
                    v.tracker.on_optimizer_step(opt)
                continue
            if r < 0.2 and not optimizers:
                gap = rng.uniform(1e-5, 2e-3)
                for v in versions:
                    v.now += gap
                    v.tracker.on_backward("train.py:30", v.now, True, v.now - gap / 2)
                continue
            # a fetch from one iterator: its wall, CPU and run-queue seconds, a batch or the pass's end
            i = rng.randrange(len(versions[0].iters))
            # long: waited for or computed at length, at times past cputime.READ_AFTER (the next fetch read)
            wall = (rng.uniform(3e-4, 5e-3) if rng.random() < 0.8 else rng.uniform(1.5e-2, 6e-2)) \
                if rng.random() < long_share else rng.uniform(5e-6, 1.5e-4)
            share, rq = rng.uniform(low, high), rng.uniform(0.0, 0.3)
            got = rng.random() > 0.01
            gap = rng.uniform(1e-5, 1e-3)
            batch = rng.choice(((1, 2), {"x": 1}, [1, 2, 3]))
            draw = rng.random() < 0.5
            fold = rng.random() < 0.05
            for v in versions:
                v.now += gap
                if v.next is not None:
                    it = v.iters[i]
                    v.fetch = (wall, share, rq, got, batch)
                    try:
                        v.next(it)
                    except StopIteration:
                        continue
                    timer = it.__dict__.get("_next_index")
                    if timer is not None and draw:
                        timer()
                    if fold:
                        v.sites.fold()
                    continue
                started = v.tracker.on_fetch_start()
                t0 = v.now + 1e-7
                v.now += wall
                v.clock.cpu_s += wall * share
                v.clock.runq_s += wall * rq
                end = v.tracker.on_fetch_end(started, got)
                if not got:
                    continue
                it = v.iters[i]
                it._num_yielded += 1
                if v.passes_step:
                    v.sites.on_fetch(it, end - t0, batch, end, v.tracker.begun)
                else:
                    v.sites.on_fetch(it, end - t0, batch, end)
                timer = it.__dict__.get("_next_index")
                if timer is not None and draw:
                    timer()
                if fold and hasattr(v.sites, "fold"):
                    v.sites.fold()
        for v in versions:
            v.tracker.finish()
            v.rows = list(v.tracker._rows)  # unrounded, before the fold
            v.tracker.drain()
            v.sites.flush()
    finally:
        time.perf_counter = real  # type: ignore[assignment]
    a, b = versions
    assert a.rows == b.rows, f"seed {seed}: the steps' rows differ"
    for kind in sorted({kind for kind, _ in a.events + b.events}):
        mine, theirs = ([f for k, f in v.events if k == kind] for v in versions)
        if mine != theirs:
            for k, (x, y) in enumerate(zip(mine, theirs, strict=False)):
                if x != y:
                    raise AssertionError(f"seed {seed}: {kind} event {k} differs:\n{x}\n{y}")
            raise AssertionError(f"seed {seed}: {len(mine)} {kind} events against {len(theirs)}")
    return len(a.rows), len(a.events)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--baseline", required=True, help="the other version's mpsprofiler package folder")
    p.add_argument("--new", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                                 "mpsprofiler"))
    p.add_argument("--sequences", type=int, default=300)
    args = p.parse_args()
    old = load(os.path.abspath(args.baseline), "mpsprofiler_old")
    new = load(os.path.abspath(args.new), "mpsprofiler_new")
    counts = [run(seed, old, new) for seed in range(args.sequences)]
    rows, events = sum(c[0] for c in counts), sum(c[1] for c in counts)
    print(f"{args.sequences} random sequences: the same {rows:,} steps' rows (bit for bit) and "
          f"{events:,} events in both versions")


if __name__ == "__main__":
    main()
