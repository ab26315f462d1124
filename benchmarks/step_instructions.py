"""Instructions per training step, bare and under the probe, counted by valgrind's callgrind.

Why: on a shared 2-core machine the wall and CPU time of a step swing by more than the
probe's per-step cost (``step_cost.py``'s rungs spread by +-150 us at a load of 4), so a
change of a few us cannot be seen there. The number of instructions a step executes does
not depend on what else runs on the machine: it shows the probe's added *work* exactly,
as a share of the step's own work, in one run. It does not show what the work costs in
time beyond its count (in a training loop the probe's code and data are evicted from the
caches between two calls, which makes each hook 2-4 times slower than alone: RESULTS.md),
so it complements the timed benchmarks and never replaces them.

Each case runs in its own process under ``valgrind --tool=callgrind --instr-atstart=no``:
torch's import, the probe's start and the warm-up steps run uninstrumented; then this
driver switches instrumentation on (``callgrind_control -i on PID``), the process runs the
counted steps, and the driver switches it off. The figure is the training thread's
instructions (``--separate-threads``): the probe's other threads (the channel's flush, the
memory sampler) wake by the wall clock, and under valgrind a step lasts ~50 times longer,
so per step they would be charged ~50 times their share; ``step_cost.py`` measures them per
wake. Their instructions in the window are printed apart. An op accounting sample inside
the window is said beside the figure (a sample is op accounting's own cost, which each
run's summary reports).

    OMP_NUM_THREADS=1 python benchmarks/step_instructions.py                 # ~10 min on 2 cores
    OMP_NUM_THREADS=1 python benchmarks/step_instructions.py --widths 32 --steps 50
    OMP_NUM_THREADS=1 python benchmarks/step_instructions.py --widths 32 --ladder        # per instrument
    OMP_NUM_THREADS=1 python benchmarks/step_instructions.py --widths 32 --baseline /tmp/old/mpsprofiler
    OMP_NUM_THREADS=1 python benchmarks/step_instructions.py --framework lightning --steps 20 --warm 40

``--quiet-schedule`` sets the probe's time thresholds as an untraced run on a quiet machine
meets them: under callgrind a step lasts ~50 times longer and the process waits for a core
at the machine's load, so every DataLoader fetch is "long" (``cputime.LONG_FETCH``: its
clocks are read at every fetch, never estimated) and the run-queue file is read whenever
the load made the thread wait (``cputime.RUNQ_SLACK``, ``RUNQ_SPAN``), which moves a rung by
thousands of instructions between runs. With the option no fetch is long (this loop's take
~40 us untraced) and the run queue is read once: what the fetch path costs at this loop's
real speed, the same in every run. (Both versions of a ``--baseline`` run get it.)

``--ladder`` counts ``step_cost.py``'s rungs (each adds one instrument) instead: the
difference of adjacent rungs is that instrument's instructions per step. ``--baseline``
names another version's ``mpsprofiler`` package folder (``step_cost.load_baseline``): its
full probe is counted beside this one's, so before and after come from one run.

The MLP of ``step_cost.py`` (``workload.py``'s, a DataLoader included): width 32 is the
"0.2 ms" case of ``overhead.py`` (0.55 ms on the 2-core machine), 256 the "1 ms", 640 the "5 ms".
``--framework lightning`` (or ``hf``) counts ``fw_workload.py``'s loop of that framework
instead (the Lightning and HF Trainer cases of ``overhead.py``), its probe started before
the framework's Trainer is built as under ``mpsprof run``, and the window switched from the
framework's own step-end callback: what the probe adds to a framework's step, against what
it adds to the plain loop's.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
VARIANTS = ("bare", "probe", "probe --no-ops")
WARM = 300
FRAMEWORKS = ("lightning", "hf")
"""Workloads counted in place of a width: ``fw_workload.py``'s loop of that framework."""
IDLE_THREAD = "bare + idle thread"
"""No probe, one more thread that only waits: what a second thread alone costs the training
thread (glibc's malloc takes its arena lock once a process has ever had two threads; the
probe's channel and sampler threads make it so)."""


def enabled_for(variant: str) -> frozenset[str] | None:
    """The instruments ``variant`` turns on (None: bare): the probe's, or a ladder rung's."""
    import step_cost as sc

    if variant in ("bare", IDLE_THREAD):
        return None
    if variant in ("probe", "baseline probe"):
        return sc.ALL - {"terminal", "memory"}
    if variant == "probe --no-ops":
        return sc.ALL - {"terminal", "memory", "ops"}
    rung = dict(sc.LADDER)[variant]
    return None if rung is None else rung - {"memory", "terminal"}  # the sampler wakes by the clock


QUIET_SCHEDULE = "STEP_INSTRUCTIONS_QUIET_SCHEDULE"
"""Set (by ``--quiet-schedule``) in the measured processes' environment."""


def quiet_schedule() -> None:
    """The time thresholds of every loaded probe package as a quiet, untraced run meets
    them (see the module docstring)."""
    import step_cost as sc

    sc.out_of_reach()


def child(variant: str, workload: str, steps: int, baseline: str | None) -> None:
    """The measured process: warm up, say READY, run ``steps`` steps on "go", say DONE."""
    sys.path.insert(0, HERE)
    import step_cost as sc

    if baseline:
        sc.load_baseline(baseline)
    if os.environ.get(QUIET_SCHEDULE):
        quiet_schedule()
    enabled = enabled_for(variant)
    probe = sc.start_probe(enabled, variant.startswith("baseline")) if enabled is not None else None
    if workload in FRAMEWORKS:
        framework_child(workload, steps, probe, variant == IDLE_THREAD)
        return
    width = int(workload)
    # built after the probe's start, as a script's loader is under ``mpsprof run``: its
    # construction hook numbers it, and every batch then goes through the per-loader
    # sums (loader_sites.py), which a loader built before the probe never reaches
    loop = sc.Loop(width, 64, True)
    if variant == IDLE_THREAD:
        import threading

        threading.Thread(target=threading.Event().wait, daemon=True).start()
    loop.block(WARM, 1)
    samples = probe.ops.samples if probe is not None and probe.ops is not None else 0
    print("READY", flush=True)
    sys.stdin.readline()
    loop.block(0, steps)
    print("DONE", flush=True)
    sys.stdin.readline()
    after = probe.ops.samples if probe is not None and probe.ops is not None else 0
    print(f"SAMPLES {after - samples}", flush=True)
    if probe is not None:
        sc.stop_probe(probe)


def framework_child(framework: str, steps: int, probe: Any, idle_thread: bool) -> None:
    """``child`` for a framework's loop: the window opens and closes at the framework's own
    step ends (``fw_workload.py``'s callback), so it holds ``steps`` whole optimizer steps."""
    import threading

    import fw_workload
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)
    if idle_thread:
        threading.Thread(target=threading.Event().wait, daemon=True).start()
    samples = [0]

    def ops_samples() -> int:
        return probe.ops.samples if probe is not None and probe.ops is not None else 0

    def step_end(global_step: int) -> None:
        if global_step == WARM:
            samples[0] = ops_samples()
            print("READY", flush=True)
            sys.stdin.readline()
        elif global_step == WARM + steps:
            print("DONE", flush=True)
            sys.stdin.readline()
            print(f"SAMPLES {ops_samples() - samples[0]}", flush=True)

    run = fw_workload.lightning if framework == "lightning" else fw_workload.hf
    run(WARM + steps + 1, step_end)
    if probe is not None:
        import step_cost as sc

        sc.stop_probe(probe)


def measure(variant: str, width: int | str, steps: int, python: str, baseline: str | None = None) -> dict[str, Any]:
    """Run one case under callgrind; instructions of its counted window, per step."""
    args = ["--child", variant, str(width), str(steps), "--warm", str(WARM)] + (
        ["--baseline", baseline] if baseline else [])  # fmt: skip
    threads, rest = count_window(python, os.path.abspath(__file__), args, f"{variant} width {width}")
    main_thread = threads[min(threads)]  # the first thread is the one that trains
    sampled = re.search(r"SAMPLES (\d+)", rest)
    # each case as it ends (a run of all of them takes long): nothing is lost to a later failure
    print(f"  {variant}, width {width}: {main_thread / steps:,.0f} instructions per step "
          f"(threads {threads})", file=sys.stderr, flush=True)
    return {"variant": variant, "width": width, "steps": steps, "instructions": main_thread,
            "per_step": main_thread / steps, "other_threads": sum(threads.values()) - main_thread,
            "samples": int(sampled.group(1)) if sampled else None}


KEEP: str | None = None
"""``--keep``: the folder each case's callgrind files are copied to, or None."""


def count_window(python: str, script: str, args: list[str], label: str) -> tuple[dict[int, int], str]:
    """Run ``script args`` under callgrind, instrumented only between the child's READY and
    DONE (each answered by a line on its stdin): the instructions per thread in that window
    and what the child printed after it."""
    out_dir = tempfile.mkdtemp(prefix="mpsprof-callgrind-")
    try:
        cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes",
               f"--callgrind-out-file={out_dir}/cg.out", python, script, *args]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env)  # fmt: skip
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None

        def expect(word: str) -> None:
            line = proc.stdout.readline()  # type: ignore[union-attr]
            while line and not line.startswith(word):
                line = proc.stdout.readline()  # type: ignore[union-attr]
            if not line:
                raise RuntimeError(f"{label}: no {word}: {proc.stderr.read()[-2000:]}")  # type: ignore[union-attr]

        def control(switch: str) -> None:
            subprocess.run(["callgrind_control", "-i", switch, str(proc.pid)], check=True, capture_output=True)

        expect("READY")
        control("on")
        proc.stdin.write("go\n")
        proc.stdin.flush()
        expect("DONE")
        control("off")
        proc.stdin.write("end\n")
        proc.stdin.flush()
        rest, err = proc.communicate(timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"{label}: rc {proc.returncode}: {err[-2000:]}")
        threads = _thread_totals(out_dir)
        if not threads:
            raise RuntimeError(f"{label}: no callgrind output: {err[-2000:]}")
        if KEEP:
            shutil.copytree(out_dir, os.path.join(KEEP, label.replace(" ", "_").replace(",", "")), dirs_exist_ok=True)
        return threads, rest
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


def _thread_totals(out_dir: str) -> dict[int, int]:
    """Instructions per thread (callgrind's ``-NN`` files, one per thread, ``totals:`` line)."""
    totals: dict[int, int] = {}
    for name in os.listdir(out_dir):
        number = re.search(r"-(\d+)$", name)
        if number is None:
            continue
        with open(os.path.join(out_dir, name)) as f:
            for line in f:
                if line.startswith("totals:"):  # ("summary:" comes first: 0 in a thread's file)
                    totals[int(number.group(1))] = int(line.split()[1])
                    break
    return totals


def main() -> None:
    global WARM, KEEP
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--widths", type=int, nargs="+", default=[32, 256, 640])
    p.add_argument("--framework", choices=FRAMEWORKS, help="count this framework's loop (fw_workload.py), not the MLP")
    p.add_argument("--steps", type=int, default=100, help="counted steps per case")
    p.add_argument("--jobs", type=int, default=2, help="cases at once (one core each)")
    p.add_argument("--ladder", action="store_true", help="count step_cost.py's ladder rungs (one instrument each)")
    p.add_argument("--baseline", help="another version's mpsprofiler package folder: its full probe is counted too")
    p.add_argument("--keep", metavar="DIR",
                   help="keep each case's callgrind files in DIR/<case> (for callgrind_annotate: where a rung's work goes)")
    p.add_argument("--idle-thread", action="store_true", help=f"count '{IDLE_THREAD}' too")
    p.add_argument("--quiet-schedule", action="store_true",
                   help="the probe's time thresholds as an untraced run on a quiet machine meets them")
    p.add_argument("--warm", type=int, default=WARM,
                   help="uninstrumented steps before the counted ones (a framework's loop under valgrind on "
                        "a loaded machine: fewer; op accounting's early samples may then fall in the window, "
                        "which the output says)")
    p.add_argument("--child", nargs=3, metavar=("VARIANT", "WIDTH", "STEPS"), help=argparse.SUPPRESS)
    args = p.parse_args()
    WARM = args.warm
    KEEP = args.keep
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]), args.baseline)
        return
    if args.baseline:
        args.baseline = os.path.abspath(args.baseline)
    if args.quiet_schedule:
        os.environ[QUIET_SCHEDULE] = "1"
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        sys.exit("valgrind (with callgrind_control) is not installed: nothing to count with")
    # a launcher script (pyenv's shim) would be traced instead; a virtualenv's link stays
    # (its interpreter finds the environment, the frameworks' packages, from that path)
    python = sys.executable if sys.prefix != sys.base_prefix else os.path.realpath(sys.executable)
    sys.path.insert(0, HERE)
    import step_cost as sc

    variants = [name for name, _ in sc.LADDER if name not in (sc.AGGREGATES, "full")] if args.ladder else list(VARIANTS)
    variants += ["baseline probe"] if args.baseline else []
    variants += [IDLE_THREAD] if args.idle_thread else []
    workloads: list[int | str] = [args.framework] if args.framework else list(args.widths)
    cases = [(v, w) for w in workloads for v in variants]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda c: measure(c[0], c[1], args.steps, python, args.baseline), cases))
    import torch

    if args.ladder:
        print(f"instructions per step by ladder rung, {args.steps} counted steps after {WARM} warm ones "
              f"(torch {torch.__version__}, Python {sys.version.split()[0]}):")
        for width in workloads:
            row = {r["variant"]: r for r in results if r["width"] == width}
            bare, prev = row["bare"]["per_step"], row["bare"]["per_step"]
            print(f"width {width}: bare {bare:,.0f}")
            for v in variants[1:]:
                got = row[v]["per_step"]
                note = f"  ({row[v]['samples']} op sample(s) in the window)" if row[v]["samples"] else ""
                print(f"  {v:<26} {got - bare:>+10,.0f} (rung {got - prev:>+9,.0f}){note}")
                prev = got if not v.startswith("baseline") else prev
        return

    print(f"instructions per step, {args.steps} counted steps after {WARM} warm ones "
          f"(torch {torch.__version__}, Python {sys.version.split()[0]}):")
    print("the training thread's instructions per step; the probe's other threads' in the whole window apart")
    print(f"{'width':>6} {'bare':>12} {'probe':>12} {'added':>9} {'share':>7}  {'--no-ops added':>14}"
          f"  {'other threads':>13}")
    for width in workloads:
        row = {r["variant"]: r for r in results if r["width"] == width}
        bare, full, no_ops = row["bare"]["per_step"], row["probe"]["per_step"], row["probe --no-ops"]["per_step"]
        note = "".join(f"  ({row[v]['samples']} op sample(s) in the window: {v})" for v in ("probe",)
                       if row[v]["samples"])  # fmt: skip
        print(f"{width:>6} {bare:>12,.0f} {full:>12,.0f} {full - bare:>+9,.0f} {(full - bare) / bare:>7.2%}"
              f"  {no_ops - bare:>+14,.0f}  {row['probe']['other_threads']:>13,}{note}")
        if "baseline probe" in row:
            base = row["baseline probe"]["per_step"]
            print(f"{'':>6} baseline probe {base:>12,.0f}, added {base - bare:>+9,.0f} ({(base - bare) / bare:.2%}): "
                  f"this version {full - base:>+,.0f} per step against it")


if __name__ == "__main__":
    main()
