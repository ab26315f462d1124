#!/bin/bash
# Session 62's device call (issues 34, 28): every GPU test with this session's probe changes
# (the sample after a leak candidate follows its phase, ops_schedule.FOLLOW_PERIOD; the early
# sample's finish counted in CPU time), then nanoGPT bf16 alone on the host, bare / mpsprof /
# --no-ops in interleaved rounds (benchmarks/overhead.py, total loop time), for op accounting's
# own account and whatever the host's noise lets the rounds resolve (session 60: little).
# Usage: bash benchmarks/h100_session62.sh OUTDIR [END_S: start no round after this many seconds]
out=${1:?outdir}; end=${2:-540}
source benchmarks/device_prelude.sh
python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"
lscpu | grep -i "model name\|thread(s) per core" | head -n 2
SECONDS=0
gpu_cores=0-3
[ "$ncpu" -lt 4 ] && gpu_cores=0-$((ncpu - 1))
timeout 300 taskset -c "$gpu_cores" python3 -m pytest -q -p no:cacheprovider -m gpu --durations=8 \
    tests/e2e/test_gpu.py tests/e2e/test_gpu_health.py tests/e2e/test_gpu_host.py > "$out/gpu_tests.txt" 2>&1
echo "gpu tests rc $? (${SECONDS}s)"; grep -E "passed|failed|FAILED|Error" "$out/gpu_tests.txt" | tail -n 20
left=$((end - SECONDS - 30)); [ "$left" -lt 60 ] && left=60
taskset -c "$gpu_cores" python3 benchmarks/overhead.py --device cuda --models gpt-bf16 --steps 1200 --repeats 12 \
    --variants bare mpsprof mpsprof-no-ops --time-limit "$left" --json "$out/gpt_bf16.json" > "$out/gpt_bf16.txt" 2>&1
echo "gpt rc $? (${SECONDS}s)"
echo "== $out/gpt_bf16.txt"; grep -v "round [0-9]*/" "$out/gpt_bf16.txt" | tail -n 16
