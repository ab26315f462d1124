"""Profiler overhead: the same workload bare, under ``mpsprof run --headless`` and under
torch.profiler, interleaved (A B C A B C ...) so drifts hit all alike; medians and ratios.

    OMP_NUM_THREADS=1 python benchmarks/overhead.py                 # CPU: ~5 ms and ~1 ms steps
    python benchmarks/overhead.py --device cuda --models cnn transformer   # on a GPU

The budget (issue: core) is at most 3% added time on a loop with >= 5 ms steps.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKLOAD = HERE / "workload.py"

CPU_CASES = {"mlp-5ms": ["--model", "mlp", "--width", "768"], "mlp-1ms": ["--model", "mlp", "--width", "256"]}
GPU_CASES = {"cnn": ["--model", "cnn"], "transformer": ["--model", "transformer"]}


def run_once(variant: str, case_args: list[str], common: list[str], tmp: Path, n: int) -> float:
    args = [str(WORKLOAD), *case_args, *common]
    if variant == "bare":
        cmd = [sys.executable, *args]
    elif variant == "mpsprof":
        cmd = [sys.executable, "-m", "mpsprofiler", "run", "--headless", "-o", str(tmp / f"run{n}"), *args]
    elif variant == "mpsprof-no-ops":
        cmd = [sys.executable, "-m", "mpsprofiler", "run", "--headless", "--no-ops", "-o", str(tmp / f"run{n}"), *args]
    elif variant == "torch.profiler":
        cmd = [sys.executable, *args, "--torch-profiler"]
    else:
        raise ValueError(variant)
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=dict(os.environ))
    for line in out.stdout.splitlines():
        if line.startswith("BENCH "):
            return json.loads(line[6:])["step_ms"]
    raise RuntimeError(f"no BENCH line from {cmd}: {out.stdout[-500:]} {out.stderr[-2000:]}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--models", nargs="*", help="cases to run (default: by device)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--variants", nargs="*", default=["bare", "mpsprof", "mpsprof-no-ops", "torch.profiler"])
    p.add_argument("--json", type=Path, help="also write the results here")
    args = p.parse_args()
    cases = GPU_CASES if args.device.startswith("cuda") else CPU_CASES
    if args.models:
        cases = {k: v for k, v in {**CPU_CASES, **GPU_CASES}.items() if k in args.models}
    common = ["--device", args.device, "--steps", str(args.steps)]
    results: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        n = 0
        for case, case_args in cases.items():
            results[case] = {v: [] for v in args.variants}
            for r in range(args.repeats):
                for variant in args.variants:
                    n += 1
                    results[case][variant].append(run_once(variant, case_args, common, tmp, n))
                print(f"  {case}: repeat {r + 1}/{args.repeats} done", file=sys.stderr, flush=True)
    print(f"\n{'case':<14}{'variant':<17}{'median step':>13}{'vs bare':>10}   (repeats: {args.repeats}, steps: {args.steps})")
    summary = {}
    for case, per in results.items():
        bare = statistics.median(per["bare"]) if "bare" in per else None
        for variant, values in per.items():
            med = statistics.median(values)
            ratio = med / bare if bare else float("nan")
            summary.setdefault(case, {})[variant] = {"median_step_ms": med, "ratio": ratio, "all": values}
            print(f"{case:<14}{variant:<17}{med:>10.3f} ms{(ratio - 1) * 100:>+9.1f}%")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
