"""Profiler overhead: the same workload bare, under ``mpsprof run --headless`` and under
torch.profiler, interleaved (A B C A B C ...) so drifts hit all alike; medians and ratios.

    OMP_NUM_THREADS=1 python benchmarks/overhead.py                 # CPU: ~5 ms and ~1 ms steps
    python benchmarks/overhead.py --device cuda          # on a GPU: cnn, transformer, cnn-pageable
    python benchmarks/overhead.py --device cuda --models cnn --time-limit 200 --json out.json

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
import time
from pathlib import Path

from mpsprofiler.environment import collect_environment

HERE = Path(__file__).resolve().parent
WORKLOAD = HERE / "workload.py"

CPU_CASES = {"mlp-5ms": ["--model", "mlp", "--width", "768"], "mlp-1ms": ["--model", "mlp", "--width", "256"]}
GPU_CASES = {
    "cnn": ["--model", "cnn"],
    "transformer": ["--model", "transformer"],
    "cnn-pageable": ["--model", "cnn", "--pageable"],  # the GPU waits for the host each step
}


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


def environment(device: str) -> dict[str, str | None]:
    """Date, machine and versions: what a results table must name (from ``mpsprofiler``'s
    own environment facts; nvidia-smi names the GPU, so this process creates no context)."""
    env = collect_environment(probe_gpu_name=device.startswith("cuda"))
    name = env["cuda_device_name"] if device.startswith("cuda") else env["chip"] or env["machine"]
    return {
        "python": env["python"], "torch": env["torch"], "device": name, "date": time.strftime("%Y-%m-%d"),
        "cores": str(env["cores_logical"]), "platform": env["os"],
    }  # fmt: skip


def summarise(results: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, dict]]:
    summary: dict[str, dict[str, dict]] = {}
    for case, per in results.items():
        bare = statistics.median(per["bare"]) if per.get("bare") else None
        for variant, values in per.items():
            if not values:
                continue
            med = statistics.median(values)
            summary.setdefault(case, {})[variant] = {
                "median_step_ms": med, "ratio": med / bare if bare else float("nan"), "all": values,
            }  # fmt: skip
    return summary


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--models", nargs="*", help="cases to run (default: by device)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--variants", nargs="*", default=["bare", "mpsprof", "mpsprof-no-ops", "torch.profiler"])
    p.add_argument("--json", type=Path, help="also write the results here (rewritten after every repeat)")
    p.add_argument("--time-limit", type=float, default=0, help="seconds: start no repeat past this; keep what ran")
    args = p.parse_args()
    cases = GPU_CASES if args.device.startswith("cuda") else CPU_CASES
    if args.models:
        known = {**CPU_CASES, **GPU_CASES}
        unknown = [m for m in args.models if m not in known]
        if unknown:
            p.error(f"unknown case(s) {unknown}; known: {sorted(known)}")
        cases = {k: known[k] for k in args.models}
    common = ["--device", args.device, "--steps", str(args.steps)]
    info = environment(args.device)
    results: dict[str, dict[str, list[float]]] = {}
    began = time.monotonic()
    stopped = False
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        n = 0
        for case, case_args in cases.items():
            results[case] = {v: [] for v in args.variants}
            for r in range(args.repeats):
                if args.time_limit and time.monotonic() - began > args.time_limit:
                    stopped = True
                    break
                for variant in args.variants:
                    n += 1
                    results[case][variant].append(run_once(variant, case_args, common, tmp, n))
                print(f"  {case}: repeat {r + 1}/{args.repeats} done ({time.monotonic() - began:.0f} s)",
                      file=sys.stderr, flush=True)  # fmt: skip
                if args.json:  # a run cut short keeps every finished repeat
                    doc = {"environment": info, "steps": args.steps, "cases": summarise(results)}
                    args.json.write_text(json.dumps(doc, indent=2))
    print(f"\n{info['date']}  {info['device']}  python {info['python']}  torch {info['torch']}")
    print(f"{'case':<14}{'variant':<17}{'median step':>13}{'vs bare':>10}   (steps: {args.steps})")
    for case, per in summarise(results).items():
        for variant, row in per.items():
            print(f"{case:<14}{variant:<17}{row['median_step_ms']:>10.3f} ms{(row['ratio'] - 1) * 100:>+9.1f}%"
                  f"   ({len(row['all'])} repeats)")  # fmt: skip
    if stopped:
        print(f"stopped at the time limit ({args.time_limit:.0f} s): fewer repeats than asked", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
