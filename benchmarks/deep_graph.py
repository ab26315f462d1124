"""A deep autograd graph under mpsprof: a GRUCell unrolled over ``--time-steps`` per step
(~55 tiny ops a time step, ~2 µs each on a CPU), never truncated. Interleaved rounds of
the loop bare, under ``mpsprof run --headless`` and, with ``--baseline``, under another
version's package (a copy of its ``mpsprofiler`` folder, first on ``PYTHONPATH`` for the
launcher and the training alike); prints the loop times, their ratios to the round's bare
run, and op accounting's own account of each run (samples, cut or not, cost).

    OMP_NUM_THREADS=1 python benchmarks/deep_graph.py --rounds 3 [--baseline OLD/mpsprofiler]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SCRIPT = '''
import sys, time, torch
from torch import nn
torch.manual_seed(0)
T, ITERS = int(sys.argv[1]), int(sys.argv[2])
cell, head = nn.GRUCell(8, 16), nn.Linear(16, 1)
opt = torch.optim.Adam(list(cell.parameters()) + list(head.parameters()), 1e-3)
x, y = torch.randn(T, 4, 8), torch.randn(4, 1)
t0 = time.perf_counter()
for it in range(ITERS):
    h = torch.zeros(4, 16)
    for t in range(T):
        h = cell(x[t], h)
    loss = nn.functional.mse_loss(head(h), y)
    opt.zero_grad(); loss.backward(); opt.step()
print("LOOP", time.perf_counter() - t0, flush=True)
'''


def loop_time(cmd: list[str], env: dict[str, str]) -> float:
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return float(next(line.split()[1] for line in out.splitlines() if line.startswith("LOOP")))


def sampled(run_dir: Path) -> str:
    ops = [json.loads(line) for line in (run_dir / "events.jsonl").open() if '"k":"ops"' in line.replace(" ", "")]
    return ", ".join(f"step {e['step']}{' cut' if e.get('truncated') else ''} {e.get('overhead_s', 0):.2f} s" for e in ops)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--time-steps", type=int, default=3000)
    p.add_argument("--iters", type=int, default=6)
    p.add_argument("--baseline", help="another version's mpsprofiler package folder")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="deep-graph-"))
    script = work / "unrolled.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    variants: dict[str, tuple[list[str], dict[str, str]]] = {"bare": ([sys.executable], env)}
    variants["mpsprof"] = ([sys.executable, "-m", "mpsprofiler", "run", "--headless", "-o"], env)
    if args.baseline:
        root = work / "baseline"
        shutil.copytree(args.baseline, root / "mpsprofiler", ignore=shutil.ignore_patterns("__pycache__"))
        variants["baseline"] = (variants["mpsprof"][0], {**env, "PYTHONPATH": str(root)})
    times: dict[str, list[float]] = {v: [] for v in variants}
    notes: dict[str, list[str]] = {v: [] for v in variants if v != "bare"}
    for r in range(args.rounds):
        names = list(variants)
        for name in names[r % len(names):] + names[:r % len(names)]:
            cmd, venv = variants[name]
            run_dir = work / f"{name}-{r}"
            full = [*cmd, str(run_dir)] if name != "bare" else list(cmd)
            times[name].append(loop_time([*full, str(script), str(args.time_steps), str(args.iters)], venv))
            if name != "bare":
                notes[name].append(sampled(run_dir))
        print(f"round {r + 1}/{args.rounds}: " + ", ".join(f"{n} {t[-1]:.2f} s" for n, t in times.items()),
              file=sys.stderr, flush=True)
    bare = times["bare"]
    print(f"GRUCell unrolled over {args.time_steps} time steps, {args.iters} steps; loop time, "
          f"median (min-max) of {args.rounds} rounds, ratio to the round's bare run")
    for name, values in times.items():
        ratios = [100 * (v / b - 1) for v, b in zip(values, bare, strict=True)]
        ratio = "" if name == "bare" else f"  {statistics.median(ratios):+.1f}% ({min(ratios):+.1f} .. {max(ratios):+.1f})"
        print(f"  {name:10s} {statistics.median(values):7.2f} s ({min(values):.2f}-{max(values):.2f}){ratio}")
    for name, runs in notes.items():
        print(f"  {name} op samples: " + " | ".join(runs))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
