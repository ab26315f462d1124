#!/bin/bash
# Session 45's second device call (issue 34): why the 0.2 ms CPU MLP ran +50% under mpsprof on
# the H100 host's CPUs (h200_session45.sh, Python 3.12, torch 2.11) where a 2-core dev machine
# (Python 3.11, torch 2.13) measures +10%. The clocks' cost on this host; the probe's Python
# calls per step (probe_call_count.py); its cost rung by rung in one process (step_cost.py,
# thread CPU time, cores 2-3); whole runs of the same workload alone on cores 6-7.
# Usage: bash benchmarks/h100_session45b.sh OUTDIR
out=${1:?outdir}
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"
lscpu | grep -E "Model name|Thread|Core|Socket|NUMA node0" ; cat /sys/devices/system/clocksource/clocksource0/current_clocksource
for f in thread_time perf_counter process_time; do
  echo -n "$f: "; taskset -c 2 python3 -m timeit -s "import time; f=time.$f" "f()"; done
taskset -c 2 python3 -c "
import os, timeit
fd = os.open('/proc/thread-self/schedstat', os.O_RDONLY)
print('pread schedstat: %.2f us' % (min(timeit.repeat(lambda: os.pread(fd, 128, 0), number=2000, repeat=5)) / 2000 * 1e6))"
( taskset -c 6-7 env CUDA_VISIBLE_DEVICES= python3 benchmarks/overhead.py --models mlp-0.2ms --repeats 3 \
    --variants bare mpsprof mpsprof-no-ops --json "$out/runs.json" > "$out/runs.txt" 2>&1 ) &
taskset -c 2-3 env CUDA_VISIBLE_DEVICES= python3 benchmarks/probe_call_count.py --top 30 > "$out/calls.txt" 2>&1
taskset -c 2-3 env CUDA_VISIBLE_DEVICES= python3 benchmarks/step_cost.py --only ladder --rounds 8 --cpu \
    --json "$out/ladder.json" > "$out/ladder.txt" 2>&1
wait
cat "$out/calls.txt"; tail -n 14 "$out/ladder.txt"; grep -v "round [0-9]*/" "$out/runs.txt" | tail -n 12
