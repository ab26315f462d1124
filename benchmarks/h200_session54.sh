#!/bin/bash
# Session 54's first device call (issues 34, 28): every GPU test with this session's code,
# then nanoGPT bf16 bare / mpsprof / --no-ops in interleaved rounds on cores 0-3. On a host of
# 16 CPUs or more the CPU workloads of issue 34 run meanwhile, the variants of each round at
# the same time on core pairs of their own (benchmarks/overhead.py --concurrent), CUDA hidden.
# Usage: bash benchmarks/h200_session54.sh OUTDIR [END_S: start no round after this many seconds] [VARIANTS]
# VARIANTS (default "bare mpsprof mpsprof-no-ops"): with mpsprof-baseline, the other version's
# mpsprofiler package is read from .baseline/ (copied there before the call, carried with it).
out=${1:?outdir}; end=${2:-500}; variants=${3:-bare mpsprof mpsprof-no-ops}
base=; case "$variants" in *mpsprof-baseline*) base="--baseline $PWD/.baseline";; esac
source benchmarks/device_prelude.sh
python3 -c "import torch, sys, textual; print('torch', torch.__version__, 'python', sys.version.split()[0])"
fw=$(python3 -c "import transformers, lightning" 2>/dev/null && echo yes || echo no); echo "frameworks: $fw"
SECONDS=0
lane() {  # name cores-a cores-b cores-c case[:steps]...
    local name=$1 a=$2 b=$3 c=$4; shift 4
    for spec in "$@"; do
        local case=${spec%%:*} steps=${spec#*:}; [ "$steps" = "$spec" ] && steps=
        CUDA_VISIBLE_DEVICES= python3 benchmarks/overhead.py --models "$case" ${steps:+--steps $steps} --repeats 7 \
            --variants $variants $base --concurrent "$a" "$b" "$c" --time-limit "$((end - 60 - SECONDS))" \
            --json "$out/$case.json" > "$out/$case.txt" 2>&1
        echo "$name $case rc $? (${SECONDS}s)"
    done
}
gpu_cores=0-3
if [ "$ncpu" -ge 16 ]; then
    lane A 4-5 6-7 8-9 mlp-0.2ms mlp-1ms mlp-5ms &
    if [ "$fw" = yes ]; then lane B 10-11 12-13 14-15 hf:600 lightning:1200 & fi
elif [ "$ncpu" -lt 4 ]; then
    gpu_cores=0-$((ncpu - 1))
fi
if [ -z "$NO_GPU_TESTS" ]; then  # NO_GPU_TESTS=1: the loops alone (a second call)
timeout 300 taskset -c "$gpu_cores" python3 -m pytest -q -p no:cacheprovider -m gpu --durations=8 \
    tests/e2e/test_gpu.py tests/e2e/test_gpu_health.py tests/e2e/test_gpu_host.py > "$out/gpu_tests.txt" 2>&1
echo "gpu tests rc $? (${SECONDS}s)"; grep -E "passed|failed|FAILED|Error" "$out/gpu_tests.txt" | tail -n 20
fi
left=$((end - SECONDS - 30)); [ "$left" -lt 60 ] && left=60
taskset -c "$gpu_cores" python3 benchmarks/overhead.py --device cuda --models gpt-bf16 --steps 600 --repeats 8 \
    --variants $variants $base --time-limit "$left" --json "$out/gpt_bf16.json" > "$out/gpt_bf16.txt" 2>&1
echo "gpt rc $? (${SECONDS}s)"
wait
for f in "$out"/*.txt; do
    [ "$f" = "$out/gpu_tests.txt" ] && continue
    echo "== $f"; grep -v "round [0-9]*/" "$f" | grep -v "Warning\|warn(\|litlogger\|TPU\|HPU\|max_steps" | tail -n 14
done
