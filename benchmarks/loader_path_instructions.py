"""Instructions a batch of the probe's DataLoader path alone, counted by callgrind.

Why: ``step_instructions.py``'s DataLoader rung (``--ladder``) moves by 5-10 k instructions a
step between runs of the same code (op accounting's samples, the channel thread's wakes
and GIL hand-overs, the heap's state: benchmarks/RESULTS.md, sessions 54-56), and a change
of a few thousand cannot be told from that. Here the path runs without the probe's threads:
a step tracker and the DataLoader hooks (``probe/loader_hooks.py``'s ``install``, as the
probe installs them) around a loop that takes batches from an in-process DataLoader and
ends a step per batch through the tracker's optimizer-step entry (the optimizer-counted
loop's steady state). The same loop without the hooks (the tracker's steps still ended) is
the reference; the difference is the path's instructions. Not the same in every run: glibc's
``malloc`` (torch's allocations, ~1.7 M instructions a batch here) swings by 3-7 k a batch with
the heap's state, as much as a change of the path (benchmarks/RESULTS.md, session 56), so
compare several runs, or the eval loop's own share in ``callgrind_annotate`` (steady to ~100).

The loader is built after the hooks (as a script's is under ``mpsprof run``: every batch
reaches the per-loader sums); the fetch thresholds are out of reach as ``--quiet-schedule``
sets them (``step_cost.out_of_reach``: these fetches take ~40 us untraced, under
``cputime.LONG_FETCH``); the pageable-batch check is off as the probe turns it off at the
first optimizer step on a device other than CUDA, where a version has that
(``PinCheck.not_on_cuda``). A version that folds the per-loader sums on the channel thread
(``LoaderSites.fold``) has them folded before the window, not inside it (fewer batches than
``loader_sites.MAX_LOG``): that work is the channel thread's, counted apart by
``loader_path_bytecodes.py``.

    OMP_NUM_THREADS=1 python benchmarks/loader_path_instructions.py --baseline /tmp/old/mpsprofiler
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
WARM = 600


def child(variant: str, batches: int, baseline: str | None) -> None:
    """The measured process: warm up, say READY, take ``batches`` batches on "go", say DONE."""
    sys.path.insert(0, HERE)
    import step_cost as sc
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    if baseline:
        sc.load_baseline(baseline)
    sc.out_of_reach()
    package = "mpsprofiler_baseline" if variant == "baseline" else "mpsprofiler"
    sites: Any = None
    steps = importlib.import_module(package + ".probe.steps")
    cpu = importlib.import_module(package + ".devices.cpu")
    # the steps end at every batch in every variant (the tracker's optimizer-step entry and
    # its step's close are no part of the DataLoader path)
    tracker = steps.StepTracker(lambda kind, **f: None, cpu.CpuBackend(), time.perf_counter)
    if variant != "bare":
        hooks = importlib.import_module(package + ".probe.loader_hooks")

        def fail(name: str, exc: BaseException) -> None:
            raise RuntimeError(f"{name}: {exc!r}")

        sites, pins, _ = hooks.install(tracker, set(), lambda kind, **f: None, None, fail, None, lambda: "cpu")
        if hasattr(pins, "not_on_cuda"):
            pins.not_on_cuda()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(4096, 32, generator=g), torch.randint(0, 10, (4096,), generator=g))
    loader = DataLoader(data, batch_size=64, shuffle=True, drop_last=True)
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    it = iter(loader)

    def take(n: int) -> None:
        nonlocal it
        for _ in range(n):
            try:
                next(it)
            except StopIteration:
                it = iter(loader)
                next(it)
            tracker.on_optimizer_step(opt)

    take(WARM)
    if sites is not None and hasattr(sites, "fold"):
        sites.fold()
    tracker.drain()
    print("READY", flush=True)
    sys.stdin.readline()
    take(batches)
    print("DONE", flush=True)
    sys.stdin.readline()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--baseline", help="another version's mpsprofiler package folder, counted beside this one")
    p.add_argument("--batches", type=int, default=2_000)
    p.add_argument("--child", nargs=2, metavar=("VARIANT", "BATCHES"), help=argparse.SUPPRESS)
    p.add_argument("--baseline-child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args.baseline_child)
        return
    sys.path.insert(0, HERE)
    from step_instructions import count_window

    variants = ["bare", "this"] + (["baseline"] if args.baseline else [])
    per_batch: dict[str, float] = {}
    for variant in variants:
        extra = ["--baseline-child", os.path.abspath(args.baseline)] if args.baseline else []
        threads, _ = count_window(sys.executable, os.path.abspath(__file__),
                                  ["--child", variant, str(args.batches), *extra], variant)
        per_batch[variant] = threads[min(threads)] / args.batches
        print(f"  {variant}: {per_batch[variant]:,.0f} instructions a batch (threads {threads})",
              file=sys.stderr, flush=True)
    bare = per_batch["bare"]
    print(f"DataLoader path, {args.batches} batches after {WARM} (the training thread's instructions a batch):")
    for variant in variants[1:]:
        print(f"  {variant:9s} {per_batch[variant]:12,.0f}  path {per_batch[variant] - bare:+10,.0f}")
    if args.baseline:
        print(f"  this against the baseline: {per_batch['this'] - per_batch['baseline']:+,.0f} a batch")


if __name__ == "__main__":
    main()
