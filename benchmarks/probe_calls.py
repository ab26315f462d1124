"""What the probe's per-step device calls cost on this machine, call by call.

The step tracker reads device-allocated memory at most every ``ALLOC_EVERY`` seconds and
records/queries one stream event per step (asynchronous devices); the sampler thread reads
the full memory figures every sample. This times each call in-process (median of batches)
so the step-time overhead seen in ``overhead.py`` can be traced to a cause.

    python benchmarks/probe_calls.py --device cuda
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

import torch

from mpsprofiler.bench import time_call
from mpsprofiler.devices.select import backend_for
from mpsprofiler.probe.steps import ALLOC_EVERY


def per_call_us(fn: Callable[[], object]) -> float:
    """Host time per call: ``bench.time_call`` without device syncs (the probe makes none)."""
    return time_call(fn, sync=lambda: None, repeats=15, min_sample_s=0.02)["median_ms"] * 1e3


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--step-ms", type=float, default=10.0, help="step time to express costs against")
    args = p.parse_args()
    device = torch.device(args.device)
    x = torch.randn(256, 256, device=device)  # initialise the device like a script would
    (x @ x).sum()
    backend = backend_for(device.type)
    rows: dict[str, float] = {}
    rows["allocated()"] = per_call_us(backend.allocated)
    rows["memory() (sampler)"] = per_call_us(backend.memory)
    event = backend.new_event()
    if event is not None:
        def record_query() -> None:
            event.record()
            event.query()

        rows["event record + query"] = per_call_us(record_query)
    step_us = args.step_ms * 1e3
    reads_per_step = min(1.0, args.step_ms / 1e3 / ALLOC_EVERY)
    per_step = rows["allocated()"] * reads_per_step + rows.get("event record + query", 0.0)
    print(f"device {device} ({backend.name()}), torch {torch.__version__}")
    for name, us in rows.items():
        print(f"  {name:<24}{us:>9.1f} us/call")
    print(f"  per {args.step_ms:g} ms step: {per_step:.2f} us = {per_step / step_us * 100:.3f}% "
          f"(allocated() read on {reads_per_step:.0%} of steps)")
    print("JSON " + json.dumps({"device": str(device), "calls_us": rows, "per_step_us": per_step}))


if __name__ == "__main__":
    main()
