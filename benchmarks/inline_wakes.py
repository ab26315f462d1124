"""What the event channel's inline wakes cost the training thread, read from a real run.

Why: where the training process started no thread, the channel starts none either
(probe/channel.py) and its periodic work (drains, the memory sample, the write) runs on the
training thread at the step boundary, the next step starting after it. So each recorded
step's start (``end - dur``) follows the previous step's end by exactly the wake's time
(0 where no wake ran): a real ``mpsprof run --headless`` of ``workload.py``'s MLP records
every wake's size itself, no instrument added. Printed: the wakes' count and sizes, their
share of the training's time, the process's OS threads when the loop has ended
(``/proc/self/status``), for the default (inline) channel and the forced threaded one
(``MPSPROF_CHANNEL_THREAD``). Those sizes are wall time: on a loaded machine a wake that
wakes the reader may lose the core meanwhile (the load is printed beside). So the script
that runs the workload also sums each wake's CPU time on the training thread
(``time.thread_time``, a wrapper around ``Channel.tick``: all wakes, the collector's and
the fetches' included), against the thread's CPU time over the whole script.

    OMP_NUM_THREADS=1 python benchmarks/inline_wakes.py --steps 20000 --width 256
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

RUNNER = """import runpy, sys, time
from mpsprofiler.probe.probe import active
channel = active().channel
spent = [0.0, 0]
if channel.inline:  # each wake's CPU time on this thread (thread_time: not the machine's load)
    tick = channel.tick
    def timed(drain=True):
        start = time.thread_time()
        try:
            return tick(drain)
        finally:
            spent[0] += time.thread_time() - start
            spent[1] += 1
    channel.tick = timed
sys.path.insert(0, {here!r})
sys.argv[0] = {workload!r}
start = time.thread_time()
runpy.run_path({workload!r}, run_name="__main__")
print("WAKES_CPU", spent[1], spent[0], time.thread_time() - start, flush=True)
with open('/proc/self/status') as fh:
    print('OS_THREADS', [l.split()[1] for l in fh if l.startswith('Threads:')][0], flush=True)
"""


def run(steps: int, width: int, threaded: bool, out: Path) -> dict[str, float | int | str]:
    """One profiled run; its wakes from the recorded steps."""
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)}
    env["MPSPROF_CHANNEL_THREAD"] = "0"  # inline wakes (opt-in)
    if threaded:
        env["MPSPROF_CHANNEL_THREAD"] = "1"
    script = out.parent / f"{out.name}_workload.py"  # the workload, with the thread count printed at exit
    script.write_text(RUNNER.format(here=str(HERE), workload=str(HERE / "workload.py")))
    proc = subprocess.run([sys.executable, "-m", "mpsprofiler", "run", "--headless", "-o", str(out), str(script),
                           "--model", "mlp", "--width", str(width), "--steps", str(steps)],
                          capture_output=True, text=True, env=env, cwd=HERE, check=True)
    threads = next((line.split()[1] for line in proc.stdout.splitlines() if line.startswith("OS_THREADS")), "?")
    cpu = next((line.split()[1:] for line in proc.stdout.splitlines() if line.startswith("WAKES_CPU")), ["0", "0", "0"])
    cpu_wakes, cpu_spent, cpu_total = int(cpu[0]), float(cpu[1]), float(cpu[2])
    end: list[float] = []
    dur: list[float] = []
    with open(out / "events.jsonl") as fh:
        for line in fh:
            event = json.loads(line)
            if event.get("k") == "steps":
                end += event.get("end", [])
                dur += event.get("dur", [])
    gaps = sorted(end[i] - dur[i] - end[i - 1] for i in range(1, len(end)))
    wakes = [g for g in gaps if g > 2e-6]  # (rounding of the recorded figures: a microsecond)
    span = end[-1] - (end[0] - dur[0]) if end else 0.0
    return {
        "channel": "threaded" if threaded else "default",
        "os_threads": threads,
        "detailed_steps": len(end),
        "span_s": round(span, 3),
        "wakes": len(wakes),
        "wake_ms_median": round(wakes[len(wakes) // 2] * 1e3, 3) if wakes else 0.0,
        "wake_ms_p90": round(wakes[int(len(wakes) * 0.9)] * 1e3, 3) if wakes else 0.0,
        "wake_ms_max": round(wakes[-1] * 1e3, 3) if wakes else 0.0,
        "share_pct": round(100 * sum(wakes) / span, 3) if span else 0.0,
        "cpu_wakes": cpu_wakes,  # all inline wakes (boundary, collector, fetches, none at exit)
        "cpu_ms_per_wake": round(cpu_spent / cpu_wakes * 1e3, 3) if cpu_wakes else 0.0,
        "cpu_share_pct": round(100 * cpu_spent / cpu_total, 3) if cpu_total else 0.0,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20000)
    p.add_argument("--width", type=int, default=256, help="workload.py's MLP width (256: the '1 ms' case)")
    p.add_argument("--repeats", type=int, default=1)
    args = p.parse_args()
    print("load", os.getloadavg())
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(args.repeats):
            for threaded in (False, True):
                row = run(args.steps, args.width, threaded, Path(tmp) / f"run{n}{int(threaded)}")
                print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    print("load", os.getloadavg())
    return 0


if __name__ == "__main__":
    sys.exit(main())
