"""Per-step cost of the probe inside a Hugging Face Trainer and a Lightning loop, in one process.

Whole-run ratios (``overhead.py --models hf lightning``) compare separate processes: on a
2-core machine shared with other work their spread (-8% .. +19% for Lightning) is far wider
than the 0.5% goal. This runs one framework loop (the tiny models of ``fw_workload.py``) and,
from the framework's own step-end callback, installs and removes the probe every few steps
in rotated order: bare, the probe without op accounting (``--no-ops``), the full probe. Each
block's first ``--warm`` steps are not timed (the early op samples fall there); a block's
figure is the median of its timed steps' time, in the training thread's CPU time (what
other processes on a shared machine cannot stretch) or wall time, and a variant's figure
is the median over rounds of its block less the same round's bare block.

What a block leaves out is op accounting's samples after the early ones (on a framework
loop one sample in ~200 steps at the default budget): their cost is what each run's summary
reports (``cost_s``), so a run's whole overhead is this per-step cost plus that account.

    OMP_NUM_THREADS=1 python benchmarks/fw_step_cost.py --framework hf          # ~1 min
    OMP_NUM_THREADS=1 python benchmarks/fw_step_cost.py --framework lightning --rounds 20
    OMP_NUM_THREADS=1 python benchmarks/fw_step_cost.py --framework gpt --rounds 20    # a plain loop, on a GPU
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fw_workload  # noqa: E402  (the same workloads as overhead.py's hf and lightning)
from step_cost import ALL, start_probe, stop_probe  # noqa: E402  (the same probe set-up as step_cost.py)

VARIANTS: dict[str, frozenset[str] | None] = {
    "bare": None,
    "mpsprof --no-ops": ALL - {"terminal", "ops"},
    "mpsprof": ALL - {"terminal"},
}


class Rotation:
    """Called at the end of every optimizer step: times the steps and switches variants."""

    def __init__(self, rounds: int, warm: int, steps: int) -> None:
        self.rounds, self.warm, self.steps = rounds, warm, steps
        self.order = [name for r in range(rounds) for name in _rotated(list(VARIANTS), r)]
        self.block = 0
        self.in_block = 0
        self.probe: Any = None
        self.times: dict[str, list[tuple[list[float], list[float]]]] = {name: [] for name in VARIANTS}
        self._wall: list[float] = []
        self._cpu: list[float] = []
        self._last: tuple[float, float] | None = None
        self.done = False
        self._start(self.order[0])

    @property
    def total_steps(self) -> int:
        return len(self.order) * (self.warm + self.steps + 1) + 2  # a block ends at its (warm + steps + 1)th call

    def _start(self, name: str) -> None:
        enabled = VARIANTS[name]
        self.probe = start_probe(enabled) if enabled is not None else None
        self._wall, self._cpu, self._last = [], [], None

    def step_end(self) -> None:
        if self.done:
            return
        now = (time.perf_counter(), time.thread_time())
        if self._last is not None and self.in_block > self.warm:
            self._wall.append(now[0] - self._last[0])
            self._cpu.append(now[1] - self._last[1])
        self.in_block += 1
        if self.in_block > self.warm + self.steps:
            name = self.order[self.block]
            if self.probe is not None:
                stop_probe(self.probe)
            self.times[name].append((self._wall, self._cpu))
            self.block += 1
            self.in_block = 0
            if self.block == len(self.order):
                self.done = True
                return
            self._start(self.order[self.block])
            now = (time.perf_counter(), time.thread_time())  # the switch is not a step's
        self._last = now

    def close(self) -> None:
        if self.probe is not None and not self.done:
            stop_probe(self.probe)


def _rotated(names: list[str], r: int) -> list[str]:
    k = r % len(names)
    return names[k:] + names[:k]


def hf(rotation: Rotation) -> None:
    """The Hugging Face Trainer workload of ``fw_workload.py``, switched at every step end."""
    fw_workload.hf(rotation.total_steps, lambda _: rotation.step_end())


def lightning(rotation: Rotation) -> None:
    """The Lightning workload of ``fw_workload.py``, switched at every step end."""
    fw_workload.lightning(rotation.total_steps, lambda _: rotation.step_end())


def gpt(rotation: Rotation) -> None:
    """nanoGPT's plain loop (``workload.py --model gpt --bf16``: bf16 autocast, TF32, fused
    AdamW) on the first GPU, switched after every ``optimizer.step()``. The host runs ahead
    of the GPU until the caching allocator or the launch queue makes it wait, so a step's
    wall time is the device's unless the host, probe included, becomes the slower side."""
    import workload

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    step = workload.training_step("gpt", 0, device, bf16=True)
    while not rotation.done:
        step()
        rotation.step_end()


FRAMEWORKS: dict[str, Callable[[Rotation], None]] = {"hf": hf, "lightning": lightning, "gpt": gpt}


def summarize(rotation: Rotation, clock: str, stat: str = "median") -> dict[str, Any]:
    """Per variant: the block's step (ms; the median of its steps, or with ``stat`` "mean"
    their mean) and the added µs per step against the same round's bare block (median over
    rounds, with min and max), and as a share of the bare step. On a GPU the mean is the
    figure: the host's step times there alternate between launching ahead and waiting for
    the device, so a block's median jumps between the two while its mean is its wall time."""
    k = 0 if clock == "wall" else 1
    pick = statistics.fmean if stat == "mean" else statistics.median
    blocks = {name: [pick(b[k]) for b in got if b[k]] for name, got in rotation.times.items()}
    bare = blocks["bare"]
    out: dict[str, Any] = {}
    for name, values in blocks.items():
        deltas = [(v - b) * 1e6 for v, b in zip(values, bare, strict=False)]  # a last round cut short pairs what it has
        out[name] = {"step_ms": statistics.median(values) * 1e3, "added_us": statistics.median(deltas),
                     "min_us": min(deltas), "max_us": max(deltas),
                     "added_pct": statistics.median(deltas) / (statistics.median(bare) * 1e6) * 100,
                     "rounds": len(deltas)}  # fmt: skip
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--framework", choices=list(FRAMEWORKS), required=True)
    p.add_argument("--rounds", type=int, default=12)
    p.add_argument("--warm", type=int, default=8, help="untimed steps per block (the early op samples fall there)")
    p.add_argument("--steps", type=int, default=24, help="timed steps per block")
    p.add_argument("--json", help="write the figures here")
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    rotation = Rotation(args.rounds, args.warm, args.steps)
    try:
        FRAMEWORKS[args.framework](rotation)
    finally:
        rotation.close()
    figures = {"cpu": summarize(rotation, "cpu"), "wall": summarize(rotation, "wall"),
               "wall_mean": summarize(rotation, "wall", "mean")}
    print(f"{args.framework}: {args.rounds} rounds of {args.steps} timed steps per variant (after {args.warm} warm)")
    titles = {"cpu": "thread CPU time", "wall": "wall time", "wall_mean": "wall time, block means"}
    for clock, rows in figures.items():
        print(f"  {titles[clock]}:")
        for name, row in rows.items():
            print(f"    {name:18s} step {row['step_ms']:7.3f} ms  added {row['added_us']:+7.1f} µs "
                  f"[{row['min_us']:+.1f} .. {row['max_us']:+.1f}]  {row['added_pct']:+.2f}%")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"framework": args.framework, "rounds": args.rounds, **figures}, f, indent=1)


if __name__ == "__main__":
    main()
