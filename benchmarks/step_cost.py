"""Per-step cost of the probe's machinery, in one process, robust to a loaded machine.

``overhead.py`` times whole runs in separate processes: on a 2-core machine shared with
other work their spread (+2% .. +21% for one case) hides a cost of a few µs per step.
This runs one tiny training loop (the MLP of ``workload.py``, DataLoader included) in one
process and installs the probe for short blocks of steps, in rotated order: bare, then
the probe with one more instrument at each rung (a ladder), so adjacent rungs give each
instrument's added µs per step. A block's figure is the *median* step time of its timed
steps (a preemption or a sampled op-accounting step does not move it), and a variant's
figure is the median over rounds of its block minus the same round's bare block.

What happens off the training thread (the memory sampler's wakes, the channel thread's
flush) is measured per wake on this thread (wall and CPU time: the GIL is held for most
of it), and multiplied by the wakes per second; the per-hook calls are timed one by one.

    OMP_NUM_THREADS=1 python benchmarks/step_cost.py                 # ~1.5 min
    OMP_NUM_THREADS=1 python benchmarks/step_cost.py --rounds 30 --json out.json
    OMP_NUM_THREADS=1 python benchmarks/step_cost.py --baseline /tmp/old/mpsprofiler --only ladder

``--baseline`` names the ``mpsprofiler`` package folder of another version (a copy of an
earlier checkout): it is imported under another name and its full probe joins the ladder,
so before and after are measured in the same rounds, on the same machine state.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
from counted_schedule import out_of_reach  # noqa: F401  (re-exported: the benchmarks call step_cost.out_of_reach)
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from mpsprofiler.probe import channel as channel_mod
from mpsprofiler.probe.probe import Probe

ALL = frozenset({"env", "overrides", "warnings", "memory", "children", "terminal", "compile", "steps", "health",
                 "backward", "dataloader", "ops", "device_time"})
LADDER: list[tuple[str, frozenset[str] | None]] = [
    ("bare", None),
    ("probe, no instrument", frozenset({"env"})),
    ("+ optimizer hooks", frozenset({"env", "compile", "steps"})),
    ("+ backward wrapper", frozenset({"env", "compile", "steps", "backward"})),
    ("+ loss check", frozenset({"env", "compile", "steps", "backward", "health"})),
    ("+ DataLoader hooks", frozenset({"env", "compile", "steps", "backward", "health", "dataloader"})),
    ("+ op accounting", frozenset({"env", "compile", "steps", "backward", "health", "dataloader", "ops"})),
    ("+ the rest (no sampler)", ALL - {"memory", "terminal"}),
    ("full", ALL - {"terminal"}),
    ("full, aggregates", ALL - {"terminal"}),
]
AGGREGATES = "full, aggregates"
"""Past ``FAST_AFTER`` fast steps the tracker keeps aggregates, not columns (steps.py)."""


class Loop:
    """The MLP of ``workload.py`` with a DataLoader, one step at a time."""

    def __init__(self, width: int, batch: int, loader: bool) -> None:
        torch.manual_seed(0)
        g = torch.Generator().manual_seed(0)
        self.net = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                                 nn.Linear(width, 10))
        data = TensorDataset(torch.randn(4096, width, generator=g), torch.randint(0, 10, (4096,), generator=g))
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.01, momentum=0.9)
        self.loss_fn = nn.CrossEntropyLoss()
        self.loader = DataLoader(data, batch_size=batch, shuffle=True, drop_last=True)
        self.fixed = (data.tensors[0][:batch], data.tensors[1][:batch])
        self.use_loader = loader
        self.it: Iterator[Any] = iter(())
        self.cpu_per_step = 0.0

    def next_batch(self) -> Any:
        if not self.use_loader:
            return self.fixed
        try:
            return next(self.it)
        except StopIteration:
            self.it = iter(self.loader)
            return next(self.it)

    def step(self) -> None:
        x, y = self.next_batch()
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.net(x), y)
        loss.backward()
        self.opt.step()

    def block(self, warm: int, steps: int) -> list[float]:
        """Per-step seconds of ``steps`` steps after ``warm`` untimed ones."""
        self.it = iter(self.loader) if self.use_loader else self.it
        for _ in range(warm):
            self.step()
        clock = time.perf_counter
        out = []
        cpu = time.thread_time()
        t = clock()
        for _ in range(steps):
            self.step()
            now = clock()
            out.append(now - t)
            t = now
        self.cpu_per_step = (time.thread_time() - cpu) / max(1, steps)
        """CPU seconds of this thread per timed step: what other processes cannot stretch."""
        return out


BASELINE: Any = None
"""(Probe class, channel module) of ``--baseline``'s package, or None."""


def load_baseline(folder: str) -> None:
    """Import another version's package under the name ``mpsprofiler_baseline`` (the
    probe imports its own modules relatively, so a renamed copy runs side by side)."""
    global BASELINE
    import importlib
    import shutil
    import tempfile

    root = tempfile.mkdtemp(prefix="step-cost-")
    shutil.copytree(folder, os.path.join(root, "mpsprofiler_baseline"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    sys.path.insert(0, root)
    probe_mod = importlib.import_module("mpsprofiler_baseline.probe.probe")
    BASELINE = (probe_mod.Probe, importlib.import_module("mpsprofiler_baseline.probe.channel"))
    LADDER.append(("baseline full", ALL - {"terminal"}))


def start_probe(enabled: frozenset[str], baseline: bool = False) -> Any:
    fd = os.open(os.devnull, os.O_WRONLY)
    probe_cls, chan = BASELINE if baseline else (Probe, channel_mod)
    probe = probe_cls(chan.Channel(fd), {"no_memory": "memory" not in enabled})
    probe.disabled.update(ALL - enabled)
    probe.install()
    atexit.unregister(probe.close)
    return probe


def stop_probe(probe: Any) -> None:
    probe.close()
    for undo in reversed(probe._uninstallers):
        try:
            undo()
        except Exception:
            pass
    _join_sampler(probe)


def _join_sampler(probe: Any) -> None:
    """A baseline's sampler thread (older versions; the sampler runs on the channel's now)."""
    thread = getattr(probe.sampler, "_thread", None)
    if thread is not None:
        thread.join(timeout=3)


def quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values``; ``q`` 0: their mean (what a whole run pays: the
    steps that read a clock, time a backward pass or check the loss count too)."""
    if q <= 0:
        return statistics.fmean(values)
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ladder(loop: Loop, rounds: int, warm: int, steps: int, q: float | None = 0.5,
           only: list[str] | None = None) -> dict[str, list[float]]:  # fmt: skip
    """Per variant, per round: the block's ``q`` quantile of step time (the median by
    default), or with ``q`` None the training thread's CPU time per step (a loaded
    machine's preemptions do not count there: the steadiest figure when cores are shared)."""
    names = [name for name, _ in LADDER if only is None or name in only or name == "bare"]
    medians: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        got: dict[str, float] = {}
        for name in order:
            enabled = dict(LADDER)[name]
            probe = start_probe(enabled, name.startswith("baseline")) if enabled is not None else None
            if probe is not None and name == AGGREGATES:
                probe.tracker._detail_end = 0
            try:
                wall = loop.block(warm, steps)
                got[name] = loop.cpu_per_step if q is None else quantile(wall, q)
            finally:
                if probe is not None:
                    stop_probe(probe)
        for name in names:
            medians[name].append(got[name])
        print(f"round {r + 1}/{rounds}: bare {got['bare'] * 1e6:.1f} µs, " + ", ".join(
            f"{name} {(got[name] - got['bare']) * 1e6:+.1f}" for name in names[1:]), file=sys.stderr, flush=True)
    return medians


def per_call_us(fn: Callable[[], object], n: int = 2000, repeats: int = 9) -> float:
    """Median over ``repeats`` of the mean µs per call of ``n`` calls."""
    per = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        per.append((time.perf_counter() - t) / n)
    return statistics.median(per) * 1e6

CHAINS = ("DataLoader batch", "backward pass", "backward, top-level loop", "optimizer step")
TOP_LEVEL = compile("\n".join([
    "def helper(x):",
    *[f"    x = x + {k}.5  # constant {k}" for k in range(40)],
    "    return x",
    *[f"name_{k} = 'a training script has many constants: {k}'" for k in range(40)],
    "(w * 2.0).sum().backward()",
]), "<a script's top level>", "exec")
"""A pass from a script's top level, as most scripts' loops are: its code object holds every
constant and nested function of the script (the backward hook keys its call site on it)."""


def chains(rounds: int, n: int = 400) -> dict[str, dict[str, float]]:
    """What each hooked entry point adds per call, the training's work cut to almost nothing:
    a DataLoader over ``range`` (batch_size=None), the backward pass of a one-op graph, SGD
    over one number. Bare, this version's full probe (and ``--baseline``'s) in rotated
    order; per round the fastest of 5 batches of ``n`` calls; the median over rounds of
    the difference to bare. Steady by construction: nothing but the hooks differs."""
    data = DataLoader(range(10**9), batch_size=None)
    w = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.0)
    it = iter(data)

    def calls() -> dict[str, Callable[[], object]]:
        def backward() -> None:
            (w * 2.0).sum().backward()

        def backward_top_level() -> None:
            exec(TOP_LEVEL, {"w": w})

        return {"DataLoader batch": lambda: next(it), "backward pass": backward,
                "backward, top-level loop": backward_top_level, "optimizer step": opt.step}

    variants = ["bare", "full"] + (["baseline full"] if BASELINE is not None else [])
    got: dict[str, dict[str, list[float]]] = {v: {c: [] for c in CHAINS} for v in variants}
    for r in range(rounds):
        for v in variants[r % len(variants):] + variants[:r % len(variants)]:
            probe = None if v == "bare" else start_probe(ALL - {"terminal", "memory"}, v.startswith("baseline"))
            try:
                fns = calls()
                opt.zero_grad()
                fns["backward pass"]()
                opt.step()  # a training step first: the tracker is in its steady (optimizer) mode
                for name, fn in fns.items():
                    best = float("inf")
                    for _ in range(5):
                        t = time.perf_counter()
                        for _ in range(n):
                            fn()
                        best = min(best, (time.perf_counter() - t) / n)
                    got[v][name].append(best)
            finally:
                if probe is not None:
                    stop_probe(probe)
    out: dict[str, dict[str, float]] = {}
    for v in variants:
        out[v] = {c: statistics.median(x) * 1e6 for c, x in got[v].items()}
        if v != "bare":
            out[v + ", added"] = {c: statistics.median([(a - b) * 1e6 for a, b in zip(got[v][c], got["bare"][c], strict=True)])
                                  for c in CHAINS}
    return out


def hooks(loop: Loop) -> dict[str, float]:
    """The per-step calls of the full probe, one by one (µs per call)."""
    from mpsprofiler.probe import health

    probe = start_probe(ALL - {"terminal", "memory"})
    try:
        loop.block(20, 20)
        tracker = probe.tracker
        rows: dict[str, float] = {}
        rows["probe.clock()"] = per_call_us(probe.clock)
        rows["time.perf_counter()"] = per_call_us(time.perf_counter)
        rows["ThreadClock.cpu()"] = per_call_us(tracker._thread_clock.cpu)
        rows["ThreadClock.runq()"] = per_call_us(tracker._thread_clock.runq)
        x, y = loop.fixed
        loss = loop.loss_fn(loop.net(x), y)
        rows["loss check (LossWatch.on_backward)"] = per_call_us(lambda: probe.health.on_backward(loss))
        rows["  of which _scalar_loss"] = per_call_us(lambda: health._scalar_loss(loss))
        rows["  of which _read"] = per_call_us(lambda: health._read(loss))
        rows["  loss.item() alone"] = per_call_us(loss.item)
        rows["sampled-step test (health)"] = per_call_us(probe.health._sampled)
        opt = loop.opt
        rows["optimizer step hooks + step close"] = per_call_us(
            lambda: tracker.on_optimizer_step(opt), n=500)
        fetch = tracker.on_fetch_start()
        rows["fetch start + end (tracker)"] = per_call_us(
            lambda: tracker.on_fetch_end(tracker.on_fetch_start(), True), n=500)
        tracker.on_fetch_end(fetch, True)
        base = nn.Linear(4, 1)
        inp = torch.randn(2, 4)

        def tiny_backward() -> None:
            base(inp).sum().backward()

        with_hooks = per_call_us(tiny_backward, n=500)
        rows["tiny backward, probe installed"] = with_hooks
    finally:
        stop_probe(probe)
    rows["tiny backward, bare"] = per_call_us(tiny_backward, n=500)
    rows["optimizer step, bare (SGD of the MLP)"] = per_call_us(loop.opt.step, n=500)
    return rows


def _timed(name: str, fn: Callable[[], object], before: Callable[[], object] | None = None,
           n: int = 30) -> dict[str, float]:
    """Median wall and CPU µs of ``n`` calls of ``fn`` (``before`` runs untimed before each)."""
    cpu, wall = [], []
    for _ in range(n):
        if before is not None:
            before()
        c, t = time.thread_time(), time.perf_counter()
        fn()
        cpu.append(time.thread_time() - c)
        wall.append(time.perf_counter() - t)
    return {f"{name}: wall µs": statistics.median(wall) * 1e6, f"{name}: CPU µs": statistics.median(cpu) * 1e6}


def sampler_and_channel(loop: Loop) -> dict[str, float]:
    """Per wake of the sampler and channel threads, timed on this thread (µs), and the
    sampler's own measure of the GIL: how long the training thread waits for it."""
    probe = start_probe(ALL - {"terminal"})
    rows: dict[str, float] = {}
    try:
        sampler = probe.sampler
        sampler.stop()
        _join_sampler(probe)
        loop.block(5, 200)  # some steps to drain
        rows.update(_timed("sampler sample()", sampler.sample))
        chan = probe.channel
        assert chan is not None
        # before each flush, ~what 0.25 s of fast steps leaves for one
        rows.update(_timed("channel flush of 100 steps", chan._flush_once, lambda: loop.block(0, 100)))
    finally:
        stop_probe(probe)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--width", type=int, default=32, help="MLP width (32: the 0.2 ms case of overhead.py)")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--no-loader", action="store_true", help="fixed batch: no DataLoader in the step")
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--steps", type=int, default=150, help="timed steps per block")
    p.add_argument("--warm", type=int, default=300,
                   help="untimed steps per block: past the early op samples (steps 3, 5) and past the first 256 "
                        "DataLoader batches, whose clocks and index draws are all read (cputime.EXACT_FETCHES, "
                        "loader_sites.INDEX_EXACT; every later one only at every 8th batch): a long run's steady "
                        "state, which 12 warm steps did not reach (~5 µs a step more)")
    p.add_argument("--only", choices=["ladder", "chains", "hooks", "threads"], nargs="*")
    p.add_argument("--quantile", type=float, default=0.5,
                   help="a block's figure: this quantile of its step times (0.25 is steadier on a loaded machine; 0: the mean)")
    p.add_argument("--cpu", action="store_true",
                   help="a block's figure: the training thread's CPU time per step (steadiest on a shared machine)")
    p.add_argument("--variants", nargs="*", help="ladder rungs to run (bare always)")
    p.add_argument("--json", help="write the figures here")
    p.add_argument("--baseline", help="another version's mpsprofiler package folder: its full probe joins the ladder")
    args = p.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    if args.baseline:
        load_baseline(args.baseline)
    loop = Loop(args.width, args.batch, not args.no_loader)
    loop.block(50, 10)
    parts = set(args.only or ["chains", "ladder", "hooks", "threads"])
    out: dict[str, Any] = {"width": args.width, "loader": not args.no_loader, "torch": torch.__version__}
    if "chains" in parts:
        out["chains_us"] = chains(max(3, args.rounds))
        print("\nper hooked call (µs; median over rounds of the fastest of 5 batches):")
        print(f"  {'':<26}" + "".join(f"{c:>26}" for c in CHAINS))
        for v, row in out["chains_us"].items():
            print(f"  {v:<26}" + "".join(f"{row[c]:>26.2f}" for c in CHAINS))
    if "hooks" in parts:
        out["hooks_us"] = hooks(loop)
        print("\nper call (µs, median of 9 batches):")
        for name, us in out["hooks_us"].items():
            print(f"  {name:<42}{us:>9.2f}")
    if "threads" in parts:
        out["threads_us"] = sampler_and_channel(loop)
        print("\nthreads, per wake (µs; the sampler wakes 2/s, 0.5/s after 10 min; the channel 4/s):")
        for name, us in out["threads_us"].items():
            print(f"  {name:<42}{us:>9.1f}")
    if "ladder" in parts:
        medians = ladder(loop, args.rounds, args.warm, args.steps, None if args.cpu else args.quantile,
                         args.variants)
        bare = medians["bare"]
        rows = {}
        what = "CPU µs per step" if args.cpu else f"step time ({args.quantile:g} quantile, µs)"
        print(f"\nladder: {args.rounds} rounds of {args.steps} steps; {what} and added µs per step "
              "vs bare (median over rounds [min..max]), and vs the rung above")
        prev = None
        for name, _ in LADDER:
            if name not in medians:
                continue
            diffs = [(v - b) * 1e6 for v, b in zip(medians[name], bare, strict=True)]
            step = [(v - q) * 1e6 for v, q in zip(medians[name], medians[prev], strict=True)] if prev else [0.0]
            rows[name] = {"step_us": statistics.median(medians[name]) * 1e6, "added_us": statistics.median(diffs),
                          "added_min": min(diffs), "added_max": max(diffs), "rung_us": statistics.median(step)}
            print(f"  {name:<26}{rows[name]['step_us']:>8.1f}   +{rows[name]['added_us']:>6.1f} "
                  f"[{min(diffs):6.1f} ..{max(diffs):6.1f}]   rung {rows[name]['rung_us']:+6.1f}")
            prev = name if name not in (AGGREGATES, "baseline full") else prev
        out["ladder"] = rows
        out["measure"] = "cpu" if args.cpu else f"quantile {args.quantile}"
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
