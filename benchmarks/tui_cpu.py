"""What the live TUI costs the machine: the parent's (mpsprof's) CPU share per panel.

Runs the real ``mpsprof run`` (TUI mode, in a pseudo-terminal of ``--size``) around a
small real training script at a given step rate, shows each panel in turn and measures
the mpsprof process's own CPU time (user + system; the training is a child process and
is not counted) over ``--window`` seconds per panel. Panels are measured side by side,
round-robin, ``--repeats`` times; the table gives the median share of one core::

    OMP_NUM_THREADS=1 python benchmarks/tui_cpu.py [--rates 10,2000] [--window 4] [--repeats 3]

Budget (issue 19): <= 5% of one core on every panel, at 10 and at 2,000 steps/s. The
machine is shared: run it when it is quiet, and read the spread, not one figure.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from tui_pty import TuiProcess  # noqa: E402

PANELS = {"overview": "1", "findings": "2", "ops": "3", "memory": "4", "data": "5", "log": "6",
          "environment": "7", "warnings": "8"}

TRAIN = textwrap.dedent('''
    """A real optimizer loop held to a step rate (0: as fast as it goes). Each step is an
    SGD update of a small model with a fixed gradient: the cheapest real step, so that
    2,000 steps/s is reachable on a laptop core with the probe attached."""
    import sys, time
    import torch
    from torch import nn

    rate, stop = float(sys.argv[1]), sys.argv[2]
    import os
    torch.manual_seed(0)
    model = nn.Linear(8, 2)
    for p in model.parameters():
        p.grad = torch.full_like(p, 1e-3)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    start = checked = time.perf_counter()
    for step in range(100_000_000):
        opt.step()
        if step % 1000 == 0:
            print(f"step {step} weight {model.weight[0, 0].item():.4f}", flush=True)
        if time.perf_counter() - checked > 0.5:
            checked = time.perf_counter()
            if os.path.exists(stop):  # the benchmark is done: end as a script ends
                break
        if rate:
            delay = start + (step + 1) / rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
''')


def cpu_seconds(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return times.user + times.system


def measure(rate: float, panels: list[str], window: float, repeats: int, size: tuple[int, int],
            workdir: Path, profile: str | None = None) -> tuple[dict[str, list[float]], float]:
    script = workdir / "train.py"
    script.write_text(TRAIN, encoding="utf-8")
    run_dir = workdir / f"run-{int(rate)}"
    python_args = ["-m", "cProfile", "-o", f"{profile}-{rate:g}.prof"] if profile else []
    stop = workdir / f"stop-{rate:g}"
    tui = TuiProcess(["run", "-o", str(run_dir), str(script), str(rate), str(stop)], size=size, cwd=workdir,
                     python_args=python_args)
    parent = psutil.Process(tui.proc.pid)
    shares: dict[str, list[float]] = {p: [] for p in panels}
    try:
        tui.wait_for(lambda: count_steps(run_dir) > 20, timeout=120, what="the first steps")
        time.sleep(3.0)  # past start-up: imports, first diagnosis
        steps_before, t_before = count_steps(run_dir), time.monotonic()
        for _ in range(repeats):
            for panel in panels:
                tui.send(PANELS[panel])
                time.sleep(1.0)  # the first draw of a panel is not its steady cost
                c0, t0 = cpu_seconds(parent), time.monotonic()
                time.sleep(window)
                shares[panel].append((cpu_seconds(parent) - c0) / (time.monotonic() - t0))
        achieved = (count_steps(run_dir) - steps_before) / (time.monotonic() - t_before)
    finally:
        stop.touch()
        try:
            tui.wait_for(lambda: (run_dir / "summary.json").exists(), timeout=30, what="the end of the script")
            tui.send("q")
            tui.finish(timeout=30)
        except BaseException:  # a benchmark cleans up whatever happened, its training too
            tui.kill()
            raise
    return shares, achieved


def count_steps(run_dir: Path) -> int:
    """Steps recorded so far: the highest step index of the ``steps`` batches, detailed
    (``i``) or aggregated (``agg.i_last``: past the probe's detail limit, fast steps
    arrive only as exact aggregates, so the detailed indices stop growing)."""
    import json

    last = 0
    try:
        with open(run_dir / "events.jsonl", "rb") as fh:
            for line in fh:
                if line.startswith(b'{"k":"steps"'):
                    try:
                        data = json.loads(line)
                    except ValueError:
                        continue
                    last = max(last, *(data.get("i") or [0]))
                    agg = data.get("agg")
                    if isinstance(agg, dict) and isinstance(agg.get("i_last"), int):
                        last = max(last, agg["i_last"])
    except OSError:
        pass
    return last + 1 if last else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="10,2000", help="step rates to hold the script to (0: unthrottled)")
    parser.add_argument("--window", type=float, default=4.0, help="seconds measured per panel and repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--size", default="120x40", help="terminal COLSxROWS")
    parser.add_argument("--panels", default=",".join(PANELS))
    parser.add_argument("--profile", metavar="PREFIX", help="also write cProfile stats of mpsprof's main thread "
                        "to PREFIX-RATE.prof")
    args = parser.parse_args()
    cols, rows = (int(v) for v in args.size.split("x"))
    panels = args.panels.split(",")
    print(f"parent CPU, % of one core (median of {args.repeats} x {args.window:g} s; min-max), terminal {args.size}")
    with tempfile.TemporaryDirectory() as tmp:
        for rate in (float(r) for r in args.rates.split(",")):
            shares, achieved = measure(rate, panels, args.window, args.repeats, (cols, rows), Path(tmp),
                                       str(Path(args.profile).resolve()) if args.profile else None)
            print(f"\ntarget {rate:g} steps/s (achieved {achieved:,.0f} steps/s)")
            print("| panel | median % | min-max % |")
            print("|---|---|---|")
            for panel in panels:
                values = [100 * v for v in shares[panel]]
                print(f"| {panel} | {statistics.median(values):.1f} | {min(values):.1f}-{max(values):.1f} |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
