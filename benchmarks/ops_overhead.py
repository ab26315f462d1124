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
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import json
import statistics
import time
from collections.abc import Callable
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


MODELS: dict[str, Callable[[torch.device], Step]] = {"mlp": make_mlp, "gru": make_gru}


def _sync(device: torch.device) -> None:
    """Wait for the device's queue (CUDA and MPS run asynchronously), via its backend."""
    backend_for(device.type).synchronize()


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
    state = {"i": 0, "t": time.perf_counter()}

    def boundary(*_: Any) -> None:
        now = time.perf_counter()
        state["i"] += 1
        acct.on_step_boundary(state["i"], now - state["t"])  # type: ignore[union-attr]
        state["t"] = now

    handle = None
    if acct is not None:
        from torch.optim.optimizer import register_optimizer_step_post_hook

        handle = register_optimizer_step_post_hook(boundary)
        acct.on_step_boundary(0, None)
    start = time.perf_counter()
    for _ in range(steps):
        step()
    _sync(device)
    elapsed = time.perf_counter() - start
    if handle is not None:
        handle.remove()
        acct.close()  # type: ignore[union-attr]
    out: dict[str, Any] = {"step_ms": elapsed / steps * 1e3, "samples": len(records)}
    if records:
        out["interval"] = records[-1]["interval"]
        out["sampled_step_ms"] = statistics.median(r["host_s"] for r in records) * 1e3
        out["ops_per_sampled_step"] = statistics.median(sum(o["calls"] for o in r["ops"]) for r in records)
    return out


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
    args = p.parse_args()
    device = torch.device(args.device)
    if os.environ.get("OMP_NUM_THREADS") == "1":
        torch.set_num_threads(1)
    report: dict[str, Any] = {"device": str(device), "torch": torch.__version__,
                              "boundary_us": boundary_cost() * 1e6, "models": {}}  # fmt: skip
    print(f"on_step_boundary, not sampling: {report['boundary_us']:.2f} µs per call")
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
