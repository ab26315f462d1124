"""Overhead of op accounting: a training loop bare, with OpAccountant sampling adaptively
(the default) and with it sampling every step (the cost of one sampled step), in-process.

Variants run interleaved (bare, adaptive, every, bare, ...) so drifts hit all alike; each
prints the median step time over repeats and its ratio to bare. Step boundaries come from
an optimizer step post-hook, as in the probe.

    OMP_NUM_THREADS=1 python benchmarks/ops_overhead.py
    OMP_NUM_THREADS=1 python benchmarks/ops_overhead.py --models gru --steps 400 --repeats 7

Budget (issue 34): adaptive sampling adds at most 0.5% (the default ``budget=0.005``), a tenth
of that once the census of ops per step stops changing; a
boundary that does not sample costs about a microsecond.

``--excess`` measures what one sampled step costs (issues 28 and 34): per run, the excess of
a sampled step and of the step after it over the run's plain steps (on the CPU in this
thread's CPU time, steady on a shared machine), and, from a run with the default schedule,
op accounting's own ``cost_s``. ``--baseline`` imports another version's package (a copy of
an earlier checkout) under another name, so old and new alternate in the same rounds:

    git worktree add /tmp/base HEAD
    OMP_NUM_THREADS=1 python benchmarks/ops_overhead.py --excess --baseline /tmp/base/mpsprofiler
    OMP_NUM_THREADS=1 python benchmarks/ops_overhead.py --excess --device cuda --models gpt-bf16
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import contextlib
import json
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from mpsprofiler.devices import backend_for
from mpsprofiler.probe.ops import OpAccountant

Step = Callable[[], None]


def make_mlp(device: torch.device) -> Step:
    """Few large ops (~5 ms per step on one core): the mode's per-op cost hardly shows."""
    model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                          nn.Linear(1024, 10)).to(device)  # fmt: skip
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(128, 512, device=device), torch.randint(0, 10, (128,), device=device)

    def step() -> None:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def make_gru(device: torch.device) -> Step:
    """Many small ops (GRU unrolled on the CPU + CTC): the worst case for a dispatch mode."""
    rnn, head = nn.GRU(32, 64).to(device), nn.Linear(64, 12).to(device)
    params = [*rnn.parameters(), *head.parameters()]
    opt = torch.optim.Adam(params, lr=1e-3)
    ctc = nn.CTCLoss(zero_infinity=True)
    x = torch.randn(30, 8, 32, device=device)
    targets = torch.randint(1, 12, (8, 8), device=device)
    lengths = torch.full((8,), 30, device=device)
    target_lengths = torch.full((8,), 8, device=device)

    def step() -> None:
        h, _ = rnn(x)
        loss = ctc(head(h).log_softmax(-1), targets, lengths, target_lengths)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def make_gpt(device: torch.device) -> Step:
    """nanoGPT's model (``workload.GPT``) scaled down to ~15 ms CPU steps: ~1,000 ops per
    step in 4 causal blocks, AdamW (foreach): the transformer case of issue 34."""
    from workload import GPT

    model = GPT(block=32, d=128, layers=4, heads=4, dropout=0.1).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 65, (4, 33), generator=g).to(device)
    x, y = tokens[:, :-1], tokens[:, 1:].reshape(-1)

    def step() -> None:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def make_gpt_bf16(device: torch.device) -> Step:
    """nanoGPT shakespeare-char as it trains on a GPU (``workload.py --model gpt --bf16``:
    6 layers, 384 wide, 256 tokens, batch 64, bf16 autocast, TF32, fused AdamW): ~8 ms
    steps on an H200, the case of issue 34."""
    from workload import GPT

    cuda = device.type == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    model = GPT().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.99), fused=cuda)
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 65, (64, 257), generator=g).to(device)
    x, y = tokens[:, :-1], tokens[:, 1:].reshape(-1)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=cuda):
            loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    return step


def make_mlp13(device: torch.device) -> Step:
    """A 13-layer MLP with single-tensor Adam (~240 ops per step): the profile of issue 28
    (every Adam op of every parameter is its own output-making op, with no module)."""
    layers: list[nn.Module] = [nn.Linear(256, 256)]
    for _ in range(6):
        layers += [nn.ReLU(), nn.Linear(256, 256)]
    model = nn.Sequential(*layers).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
    x, y = torch.randn(64, 256, device=device), torch.randint(0, 256, (64,), device=device)

    def step() -> None:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


MODELS: dict[str, Callable[[torch.device], Step]] = {"mlp": make_mlp, "gru": make_gru, "gpt": make_gpt,
                                                     "mlp13": make_mlp13, "gpt-bf16": make_gpt_bf16}


def _sync(device: torch.device) -> None:
    """Wait for the device's queue (CUDA and MPS run asynchronously), via its backend."""
    backend_for(device.type).synchronize()


@contextlib.contextmanager
def driven(acct: Any) -> Iterator[None]:
    """For the block: a step boundary for ``acct`` after every optimizer step (as the
    probe's step tracker gives it, with the step's duration), then ``acct`` closed."""
    from torch.optim.optimizer import register_optimizer_step_post_hook

    state = {"i": 0, "t": time.perf_counter()}

    def boundary(*_: Any) -> None:
        now = time.perf_counter()
        state["i"] += 1
        acct.on_step_boundary(state["i"], now - state["t"])
        state["t"] = now

    handle = register_optimizer_step_post_hook(boundary)
    acct.on_step_boundary(0, None)
    try:
        yield
    finally:
        handle.remove()
        acct.close()


def run(make: Callable[[torch.device], Step], variant: str, steps: int, device: torch.device,
        warmup: int = 5) -> dict[str, Any]:  # fmt: skip
    """Mean step time of one run (ms), plus what the accountant reported."""
    torch.manual_seed(0)
    step = make(device)
    records: list[dict[str, Any]] = []
    acct = None
    if variant != "bare":
        acct = OpAccountant(lambda kind, **f: records.append(f) if kind == "ops" else None,
                            every_step=variant == "every")  # fmt: skip
    for _ in range(warmup):
        step()
    _sync(device)
    with driven(acct) if acct is not None else contextlib.nullcontext():
        start = time.perf_counter()
        for _ in range(steps):
            step()
        _sync(device)
        elapsed = time.perf_counter() - start
    out: dict[str, Any] = {"step_ms": elapsed / steps * 1e3, "samples": len(records)}
    if records:
        out["interval"] = records[-1]["interval"]
        out["sampled_step_ms"] = statistics.median(r["host_s"] for r in records) * 1e3
        out["ops_per_sampled_step"] = statistics.median(sum(o["calls"] for o in r["ops"]) for r in records)
    return out


BASELINE: dict[str, Any] = {}
"""``--baseline``: the other version's OpAccountant class, under ``"old"``."""


def load_baseline(folder: str) -> None:
    """Import another version's package as ``mpsprofiler_baseline`` (the probe imports its
    own modules relatively, so a renamed copy runs side by side in this process)."""
    import importlib
    import shutil
    import sys
    import tempfile

    root = tempfile.mkdtemp(prefix="ops-overhead-")
    shutil.copytree(folder, os.path.join(root, "mpsprofiler_baseline"), ignore=shutil.ignore_patterns("__pycache__"))
    sys.path.insert(0, root)
    BASELINE["old"] = importlib.import_module("mpsprofiler_baseline.probe.ops").OpAccountant


def excess(make: Callable[[torch.device], Step], accountant: Any, device: torch.device, samples: int = 6,
           period: int = 6, warmup: int = 5) -> dict[str, float]:  # fmt: skip
    """One run that samples every ``period``-th step: the median excess (ms) of a sampled
    step and of the step after it over the plain steps of the same run (the ones two or
    more steps after a sample). On the CPU, steps are timed in this thread's CPU time,
    which other processes on a shared machine do not stretch."""
    torch.manual_seed(0)
    step = make(device)
    for _ in range(warmup):
        step()
    first = 3
    acct = accountant(lambda kind, **f: None, early_steps=range(first, first + samples * period, period))
    times = []
    clock = time.thread_time if device.type == "cpu" else time.perf_counter
    with driven(acct):
        for _ in range(first + samples * period):
            t0 = clock()
            step()
            _sync(device)
            times.append(clock() - t0)
    # step i (0-based) ends at boundary i + 1: the one sampled as step s is times[s]
    sampled = [first + k * period for k in range(samples)]
    plain = statistics.median(times[s + j] for s in sampled for j in range(2, period) if s + j < len(times))
    return {"plain_ms": plain * 1e3, "first_ms": (times[first] - plain) * 1e3,
            "sampled_ms": statistics.median(times[s] - plain for s in sampled) * 1e3,
            "after_ms": statistics.median(times[s + 1] - plain for s in sampled) * 1e3}  # fmt: skip


def run_cost(make: Callable[[torch.device], Step], accountant: Any, device: torch.device,
             steps: int) -> dict[str, float]:  # fmt: skip
    """One run of ``steps`` with the default schedule: what op accounting says it cost
    (``cost_s``, the figure its events carry) over the run's step time."""
    torch.manual_seed(0)
    step = make(device)
    for _ in range(5):
        step()
    acct = accountant(lambda kind, **f: None)
    with driven(acct):
        for _ in range(steps):
            step()
        _sync(device)
    sched = acct.schedule
    return {"cost_ms": sched.added * 1e3, "share": sched.added / sched.total if sched.total else 0.0,
            "samples": sched.samples}  # fmt: skip


def excess_report(models: list[str], rounds: int, steps: int, device: torch.device) -> dict[str, Any]:
    """Sampled-step excess and per-run cost, this version and ``--baseline``'s, interleaved."""
    versions = {"new": OpAccountant, **BASELINE}
    report: dict[str, Any] = {}
    for name in models:
        got: dict[str, dict[str, list[float]]] = {v: {} for v in versions}
        for r in range(rounds):
            order = list(versions) if r % 2 == 0 else list(versions)[::-1]
            for version in order:
                for key, value in excess(MODELS[name], versions[version], device).items():
                    got[version].setdefault(key, []).append(value)
                for key, value in run_cost(MODELS[name], versions[version], device, steps).items():
                    got[version].setdefault(key, []).append(value)
        print(f"\n{name} on {device}: {rounds} rounds, interleaved; sampled-step excess over a plain step "
              f"(median of 6 samples per run), and a {steps}-step run's op accounting cost_s (median over rounds)")
        report[name] = {}
        for version, rows in got.items():
            med = {k: statistics.median(v) for k, v in rows.items()}
            report[name][version] = med
            print(f"  {version:4s} plain {med['plain_ms']:7.2f} ms  sampled +{med['sampled_ms']:7.2f} ms  "
                  f"after +{med['after_ms']:6.2f} ms  first +{med['first_ms']:6.2f} ms  [sampled {min(rows['sampled_ms']):.2f}..{max(rows['sampled_ms']):.2f}]"
                  f"  cost_s {med['cost_ms']:7.1f} ms = {med['share'] * 100:.2f}% of {steps} steps"
                  f" ({med['samples']:.0f} samples)")
    return report


def boundary_cost(n: int = 200_000) -> float:
    """Seconds per on_step_boundary call that does not start or end a sample."""
    acct = OpAccountant(lambda kind, **f: None, early_steps=())
    acct._next_sample = float("inf")
    start = time.perf_counter()
    for i in range(n):
        acct.on_step_boundary(i, 0.005)
    return (time.perf_counter() - start) / n


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--models", nargs="*", default=list(MODELS))
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--variants", nargs="*", default=["bare", "adaptive", "every"])
    p.add_argument("--json", help="also write the results to this file")
    p.add_argument("--excess", action="store_true",
                   help="measure the excess of a sampled step and a run's cost_s instead (gpt and mlp13 by default)")
    p.add_argument("--baseline", help="another version's mpsprofiler package folder: --excess measures it too")
    args = p.parse_args()
    device = torch.device(args.device)
    if os.environ.get("OMP_NUM_THREADS") == "1":
        torch.set_num_threads(1)
    report: dict[str, Any] = {"device": str(device), "torch": torch.__version__,
                              "boundary_us": boundary_cost() * 1e6, "models": {}}  # fmt: skip
    print(f"on_step_boundary, not sampling: {report['boundary_us']:.2f} µs per call")
    if args.excess:
        if args.baseline:
            load_baseline(args.baseline)
        models = args.models if args.models != list(MODELS) else ["gpt", "mlp13"]
        report["excess"] = excess_report(models, args.repeats, args.steps, device)
        args.models = []
    for name in args.models:
        runs: dict[str, list[dict[str, Any]]] = {v: [] for v in args.variants}
        for _ in range(args.repeats):
            for variant in args.variants:
                runs[variant].append(run(MODELS[name], variant, args.steps, device))
        bare = statistics.median(r["step_ms"] for r in runs["bare"]) if "bare" in runs else None
        rows = {}
        print(f"\n{name} on {device}: {args.steps} steps x {args.repeats} repeats (median of per-run mean step time)")
        for variant, results in runs.items():
            ms = statistics.median(r["step_ms"] for r in results)
            row: dict[str, Any] = {"step_ms": ms, "ratio": ms / bare if bare else None,
                                   "samples": statistics.median(r["samples"] for r in results)}  # fmt: skip
            for key in ("interval", "sampled_step_ms", "ops_per_sampled_step"):
                values = [r[key] for r in results if key in r]
                if values:
                    row[key] = statistics.median(values)
            rows[variant] = row
            extra = "".join(f"  {k}={row[k]:.4g}" for k in ("samples", "interval", "sampled_step_ms",
                                                             "ops_per_sampled_step") if k in row)  # fmt: skip
            ratio = f"{row['ratio']:.3f}x" if row["ratio"] else "-"
            print(f"  {variant:9s} {ms:8.3f} ms/step  {ratio:>8s}{extra}")
        report["models"][name] = rows
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
