"""Profiler overhead: total loop time of the same workload bare, under ``mpsprof run
--headless`` (op accounting on, default budget), with ``--no-ops`` and under
torch.profiler, in interleaved rounds (bare A B C, A B C bare, ...: each round starts with
the next variant) so drifts and a round's first-run penalty hit all alike.

    OMP_NUM_THREADS=1 python benchmarks/overhead.py                    # CPU: MLP 5/1/0.2 ms
    OMP_NUM_THREADS=1 python benchmarks/overhead.py --models hf lightning \\
        --fw-python /path/to/venv/bin/python                           # framework loops
    python benchmarks/overhead.py --device cuda --models gpt --repeats 5   # nanoGPT-like, GPU
    python benchmarks/overhead.py --concurrent 4-5 6-7 8-9 --variants bare mpsprof mpsprof-no-ops
    python benchmarks/overhead.py --concurrent 0 1 --variants mpsprof-baseline mpsprof --baseline /tmp/old

``--baseline DIR`` (a folder holding another version's ``mpsprofiler`` package) makes the variant
``mpsprof-baseline``: ``mpsprof run`` of that version, for before and after in the same rounds.
Ratios are to ``bare``, or where no bare variant runs, to the first variant named (on a 2-core
machine ``--concurrent`` fits two variants: the old and the new probe side by side).

``--concurrent``: the variants of a round run *at the same time*, each pinned (``taskset``) to
one of the given core sets, the sets rotated round by round so every variant runs on every
set. On a shared host (a cloud VM's vCPUs) a fixed workload's time drifts by 10-30% between
runs seconds apart (another tenant, clock boost: RESULTS.md, sessions 45 and 52), which hides
a budget of 0.5-3% whatever the number of rounds; runs that share the same seconds share
that drift, so their ratio keeps the difference the probe makes and loses the drift. A core
set per variant (two cores: the training and mpsprof's launcher) keeps them off each other's
cores; what they still share (the last-level cache, memory bandwidth) they share alike.
Their steps start together (``barrier.py``): mpsprof's start-up (~1 s) would otherwise put the
bare run's loop beside the other's imports and leave the other's last second alone.

Every variant's total loop time is listed per round; the table gives, per variant, the
median loop time with its min-max, and the median (min-max) of the per-round ratio to the
bare run of the same round: a pair shares the machine's state, so its ratio is the
figure that survives a loaded machine best. Loop time excludes interpreter start, imports
and setup (the workloads clock themselves).

Budget (issue 34): with op accounting on, at most 0.5% added time at >= 5 ms steps, 3% at
1 ms, 10% at 0.2 ms.
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
from typing import Any

from mpsprofiler.environment import collect_environment

HERE = Path(__file__).resolve().parent
WORKLOAD = HERE / "workload.py"
FW_WORKLOAD = HERE / "fw_workload.py"

# case -> (script, arguments, steps, budget)
CPU_CASES: dict[str, tuple[Path, list[str], int, float]] = {
    "mlp-5ms": (WORKLOAD, ["--model", "mlp", "--width", "640"], 600, 0.005),
    "mlp-1ms": (WORKLOAD, ["--model", "mlp", "--width", "256"], 3000, 0.03),
    "mlp-0.2ms": (WORKLOAD, ["--model", "mlp", "--width", "32"], 12000, 0.10),
    "hf": (FW_WORKLOAD, ["--framework", "hf"], 200, 0.005),
    "lightning": (FW_WORKLOAD, ["--framework", "lightning"], 600, 0.005),
}
GPU_CASES: dict[str, tuple[Path, list[str], int, float]] = {
    "gpt": (WORKLOAD, ["--model", "gpt"], 1200, 0.005),
    "gpt-bf16": (WORKLOAD, ["--model", "gpt", "--bf16"], 1200, 0.005),  # nanoGPT's own dtype: ~8 ms steps
    "cnn": (WORKLOAD, ["--model", "cnn"], 300, 0.005),
    "transformer": (WORKLOAD, ["--model", "transformer"], 300, 0.005),
    "cnn-pageable": (WORKLOAD, ["--model", "cnn", "--pageable"], 300, 0.005),
}
FRAMEWORKS = {"hf", "lightning"}


BASELINE: list[str | None] = [None]
"""``--baseline``: the folder that holds the other version's ``mpsprofiler`` package."""


def command(variant: str, python: str, script: Path, case_args: list[str], common: list[str],
            run_dir: Path) -> list[str]:  # fmt: skip
    args = [str(script), *case_args, *common]
    if variant == "bare":
        return [python, *args]
    if variant == "mpsprof-baseline" and BASELINE[0]:
        # -P: ``-m`` would put the working directory (the repository's root, this version)
        # before PYTHONPATH, and the baseline's run would have this version's launcher; the
        # folder goes first and the rest of PYTHONPATH stays (packages carried as wheels)
        path = os.pathsep.join(p for p in (BASELINE[0], os.environ.get("PYTHONPATH", "")) if p)
        return ["env", f"PYTHONPATH={path}", python, "-P", "-m", "mpsprofiler", "run", "--headless", "-o",
                str(run_dir), *args]
    if variant == "mpsprof":
        return [python, "-m", "mpsprofiler", "run", "--headless", "-o", str(run_dir), *args]
    if variant == "mpsprof-no-ops":
        return [python, "-m", "mpsprofiler", "run", "--headless", "--no-ops", "-o", str(run_dir), *args]
    if variant == "torch.profiler":
        return [python, *args, "--torch-profiler"]
    raise ValueError(variant)


def run_round(variants: list[str], python: str, script: Path, case_args: list[str], common: list[str],
              tmp: Path, n: int, cores: list[str]) -> dict[str, tuple[float, float | None, dict[str, Any]]]:  # fmt: skip
    """The variants at the same time, ``variants[i]`` pinned to ``cores[i]`` (see the module
    docstring); per variant what :func:`run_once` returns."""
    procs = {}
    # a start line (benchmarks/barrier.py): each run's steps begin when all have reached it
    env = {**os.environ, "BENCH_BARRIER_DIR": str(tmp / f"barrier{n}"), "BENCH_BARRIER_PARTIES": str(len(variants))}
    for i, variant in enumerate(variants):
        run_dir = tmp / f"run{n}-{i}"
        cmd = ["taskset", "-c", cores[i], *command(variant, python, script, case_args, common, run_dir)]
        procs[variant] = (subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                           env=env), cmd, run_dir)  # fmt: skip
    out = {}
    for variant, (proc, cmd, run_dir) in procs.items():
        stdout, stderr = proc.communicate()
        if proc.returncode:
            raise RuntimeError(f"{cmd} exited {proc.returncode}: {stderr[-2000:]}")
        out[variant] = _parsed(variant, cmd, stdout, stderr, run_dir)
    return out


def run_once(variant: str, python: str, script: Path, case_args: list[str], common: list[str],
             tmp: Path, n: int) -> tuple[float, float | None, dict[str, Any]]:  # fmt: skip
    """One run; (loop seconds, the training process's CPU seconds over the loop, op
    accounting facts of the mpsprof run or {})."""
    run_dir = tmp / f"run{n}"
    cmd = command(variant, python, script, case_args, common, run_dir)
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=dict(os.environ))
    return _parsed(variant, cmd, out.stdout, out.stderr, run_dir)


def _parsed(variant: str, cmd: list[str], stdout: str, stderr: str,
            run_dir: Path) -> tuple[float, float | None, dict[str, Any]]:  # fmt: skip
    loop, cpu = None, None
    for line in stdout.splitlines():
        if line.startswith("BENCH "):
            bench = json.loads(line[6:])
            loop, cpu = float(bench["loop_s"]), bench.get("cpu_s")
    if loop is None:
        raise RuntimeError(f"no BENCH line from {cmd}: {stdout[-500:]} {stderr[-2000:]}")
    facts = op_accounting_facts(run_dir) if variant in ("mpsprof", "mpsprof-baseline") else {}
    return loop, cpu, facts


def op_accounting_facts(run_dir: Path) -> dict[str, Any]:
    """Op accounting's own account of an mpsprof run, read from its recording: samples,
    ``cost_s``, ``share`` of the training time, ``converged``, and the ``steps`` it counted."""
    try:
        from mpsprofiler.session.recording import load_run

        session = load_run(run_dir).session
        ops, training = session.ops, session.steps.total_dur
        return {"samples": ops.sampled_steps, "cost_s": ops.cost_s, "converged": ops.converged,
                "share": ops.cost_share(training), "steps": session.steps.count}  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - a figure left out, not a failed benchmark
        return {"error": repr(exc)}


def environment(device: str) -> dict[str, str | None]:
    """Date, machine and versions: what a results table must name."""
    env = collect_environment(probe_gpu_name=device.startswith("cuda"))
    name = env["cuda_device_name"] if device.startswith("cuda") else env["chip"] or env["machine"]
    return {
        "python": env["python"], "torch": env["torch"], "device": name, "date": time.strftime("%Y-%m-%d %H:%M"),
        "cores": str(env["cores_logical"]), "platform": env["os"],
    }  # fmt: skip


def load_average() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "?"


def summarise(results: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per case and variant: median loop time (min-max) and the per-round ratio to bare (or,
    without a bare variant, to the first one: :func:`reference`)."""
    summary: dict[str, dict[str, dict[str, Any]]] = {}
    for case, per in results.items():
        ref = reference(list(per))
        bare = per.get(ref) or []
        for variant, values in per.items():
            if not values:
                continue
            row: dict[str, Any] = {"median_s": statistics.median(values), "min_s": min(values),
                                   "max_s": max(values), "all_s": values}  # fmt: skip
            ratios = [v / b for v, b in zip(values, bare, strict=False) if b > 0]
            if ratios and variant != ref:
                row.update(ratio=statistics.median(ratios), ratio_min=min(ratios), ratio_max=max(ratios))
            summary.setdefault(case, {})[variant] = row
    return summary


def reference(variants: list[str]) -> str:
    """The variant the others' ratios are to: bare, else the first one."""
    return "bare" if "bare" in variants or not variants else variants[0]


def markdown(summary: dict[str, dict[str, dict[str, Any]]], steps: dict[str, int], budgets: dict[str, float],
             variants: list[str]) -> str:  # fmt: skip
    head = "| case | steps | " + " | ".join(variants) + " | budget |"
    lines = [head, "|" + "---|" * (len(variants) + 3)]
    for case, per in summary.items():
        cells = []
        for v in variants:
            row = per.get(v)
            if row is None:
                cells.append("")
            elif v == reference(variants):
                cells.append(f"{row['median_s']:.3f} s ({row['min_s']:.3f}-{row['max_s']:.3f})")
            else:
                pct = lambda r: f"{(r - 1) * 100:+.1f}%"  # noqa: E731
                cells.append(f"{pct(row['ratio'])} ({pct(row['ratio_min'])} .. {pct(row['ratio_max'])})")
        lines.append(f"| {case} | {steps[case]} | " + " | ".join(cells) + f" | {budgets[case] * 100:g}% |")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--models", nargs="*", help="cases to run (default: by device)")
    p.add_argument("--repeats", type=int, default=5, help="interleaved rounds (each runs every variant once)")
    p.add_argument("--steps", type=int, help="steps per run (default: per case)")
    p.add_argument("--variants", nargs="*", default=["bare", "mpsprof", "mpsprof-no-ops", "torch.profiler"])
    p.add_argument("--fw-python", default=sys.executable, help="python with transformers/lightning (hf, lightning)")
    p.add_argument("--json", type=Path, help="also write the results here (rewritten after every round)")
    p.add_argument("--time-limit", type=float, default=0, help="seconds: start no round past this; keep what ran")
    p.add_argument("--concurrent", nargs="*", metavar="CORES",
                   help="run a round's variants at once, each on one of these core sets (taskset lists, "
                        "one per variant), rotated round by round")
    p.add_argument("--baseline", help="a folder holding another version's mpsprofiler package (mpsprof-baseline)")
    args = p.parse_args()
    if "mpsprof-baseline" in args.variants and not args.baseline:
        p.error("the variant mpsprof-baseline needs --baseline")
    BASELINE[0] = os.path.abspath(args.baseline) if args.baseline else None
    if args.concurrent is not None and len(args.concurrent) < len(args.variants):
        p.error(f"--concurrent needs a core set per variant ({len(args.variants)})")
    cases = GPU_CASES if args.device.startswith("cuda") else CPU_CASES
    if args.models:
        known = {**CPU_CASES, **GPU_CASES}
        unknown = [m for m in args.models if m not in known]
        if unknown:
            p.error(f"unknown case(s) {unknown}; known: {sorted(known)}")
        cases = {k: known[k] for k in args.models}
    info = environment(args.device)
    results: dict[str, dict[str, list[float]]] = {}
    cpu_results: dict[str, dict[str, list[float]]] = {}
    """The training process's CPU seconds over the loop, per case and variant: on a shared
    host the loop's wall time varies run to run by far more than the 0.5% to find (another
    tenant's load, clock boost), its CPU time much less; it counts the probe's threads in
    the training process, not mpsprof's launcher process beside it."""
    facts: dict[str, list[dict[str, Any]]] = {}
    loads: dict[str, list[str]] = {}
    steps = {c: args.steps or spec[2] for c, spec in cases.items()}
    budgets = {c: spec[3] for c, spec in cases.items()}
    began = time.monotonic()
    stopped = False
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        n = 0
        for case, (script, case_args, _, _) in cases.items():
            python = args.fw_python if case in FRAMEWORKS else sys.executable
            common = ["--steps", str(steps[case])] + ([] if case in FRAMEWORKS else ["--device", args.device])
            results[case] = {v: [] for v in args.variants}
            for r in range(args.repeats):
                if args.time_limit and time.monotonic() - began > args.time_limit:
                    stopped = True
                    break
                loads.setdefault(case, []).append(load_average())
                # each round starts with the next variant: the first run of a round measured
                # 5-10% slower here whatever it was (bare first in every round came out slower
                # than mpsprof in 5 of 5 rounds), so a fixed order biases the ratios
                k = r % len(args.variants)
                order = args.variants[k:] + args.variants[:k]
                if args.concurrent is not None:
                    n += 1
                    got = run_round(order, python, script, case_args, common, tmp, n, args.concurrent)
                else:
                    got = {}
                    for variant in order:
                        n += 1
                        got[variant] = run_once(variant, python, script, case_args, common, tmp, n)
                for variant in order:
                    loop, cpu, f = got[variant]
                    results[case][variant].append(loop)
                    if cpu is not None:
                        cpu_results.setdefault(case, {}).setdefault(variant, []).append(cpu)
                    if f:
                        facts.setdefault(case, []).append({**f, "variant": variant})
                print(f"  {case}: round {r + 1}/{args.repeats} "
                      + " ".join(f"{v}={results[case][v][-1]:.3f}" for v in args.variants if results[case][v])
                      + f"  load {loads[case][-1]}  ({time.monotonic() - began:.0f} s)", file=sys.stderr, flush=True)  # fmt: skip
                if args.json:  # a run cut short keeps every finished round
                    doc = {"environment": info, "steps": steps, "cases": summarise(results),
                           "cpu": summarise(cpu_results), "facts": facts, "load": loads}  # fmt: skip
                    args.json.write_text(json.dumps(doc, indent=2))
    print(f"\n{info['date']}  {info['device']}  python {info['python']}  torch {info['torch']}  "
          f"cores {info['cores']}")  # fmt: skip
    print(markdown(summarise(results), steps, budgets, list(args.variants)))
    if cpu_results:
        print("\nCPU seconds of the training process over the loop (all its threads):")
        print(markdown(summarise(cpu_results), steps, budgets, list(args.variants)))
    for case, rows in facts.items():
        print(f"{case}: op accounting " + "; ".join(
            f"{r.get('variant')}: {r.get('samples')} samples of {r.get('steps')} steps, cost {1e3 * (r.get('cost_s') or 0):.1f} ms "
            f"({100 * (r.get('share') or 0):.2f}%){' converged' if r.get('converged') else ''}"
            for r in rows))  # fmt: skip
    for case, ls in loads.items():
        print(f"{case}: load average at each round: {' | '.join(ls)}")
    if stopped:
        print(f"stopped at the time limit ({args.time_limit:.0f} s): fewer rounds than asked", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
