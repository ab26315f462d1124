#!/bin/bash
# Session 52's device call (issues 34, 28): every GPU test with this session's code (the
# anomaly test fixed after session 51's call among them), then nanoGPT bf16 bare / mpsprof /
# --no-ops in interleaved rounds (benchmarks/overhead.py, total loop time). On a host of 16
# CPUs or more, the CPU workloads of issue 34 run meanwhile in lanes of their own cores (the
# MLP at 5, 1 and 0.2 ms steps; the HF Trainer and Lightning where installed), CUDA hidden,
# while the GPU tests and nanoGPT keep cores 0-3.
# Usage: bash benchmarks/h100_session52.sh OUTDIR [END_S: start no round after this many seconds]
out=${1:?outdir}; end=${2:-500}
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi -L; ncpu=$(nproc); echo "nproc $ncpu"; uptime
python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-deps .whl/*.whl 2>&1 | tail -n 3; echo "wheels rc ${PIPESTATUS[0]}"
fi
fw=$(python3 -c "import transformers, lightning" 2>/dev/null && echo yes || echo no); echo "frameworks: $fw"
SECONDS=0
lane() {  # cores case
    taskset -c "$1" env CUDA_VISIBLE_DEVICES= python3 benchmarks/overhead.py --models "$2" --repeats 10 \
        --variants bare mpsprof mpsprof-no-ops --time-limit "$((end - 40))" --json "$out/$2.json" > "$out/$2.txt" 2>&1
}
gpu_cores=0-3
if [ "$ncpu" -ge 16 ]; then
    lane 4-5 mlp-5ms & lane 6-7 mlp-1ms & lane 8-9 mlp-0.2ms &
    if [ "$fw" = yes ]; then lane 10-11 hf & lane 12-13 lightning & fi
elif [ "$ncpu" -lt 4 ]; then
    gpu_cores=0-$((ncpu - 1))
fi
timeout 320 taskset -c "$gpu_cores" python3 -m pytest -q -p no:cacheprovider -m gpu --durations=8 \
    tests/e2e/test_gpu.py tests/e2e/test_gpu_health.py tests/e2e/test_gpu_host.py > "$out/gpu_tests.txt" 2>&1
echo "gpu tests rc $? (${SECONDS}s)"; grep -E "passed|failed|FAILED|Error" "$out/gpu_tests.txt" | tail -n 20
left=$((end - SECONDS - 30)); [ "$left" -lt 60 ] && left=60
taskset -c "$gpu_cores" python3 benchmarks/overhead.py --device cuda --models gpt-bf16 --steps 600 --repeats 8 \
    --variants bare mpsprof mpsprof-no-ops --time-limit "$left" --json "$out/gpt_bf16.json" > "$out/gpt_bf16.txt" 2>&1
echo "gpt rc $? (${SECONDS}s)"
wait
for f in "$out"/*.txt; do
    [ "$f" = "$out/gpu_tests.txt" ] && continue
    echo "== $f"; grep -v "round [0-9]*/" "$f" | grep -v "Warning\|warn(\|litlogger\|TPU\|HPU\|max_steps" | tail -n 14
done
