#!/bin/bash
# Session 59's device call (issues 34, 28): every workload of issue 34 in one call, at run
# lengths of real training (nanoGPT shakespeare-char trains 5000 iterations; here 2000, ~17 s
# on an H100, so a run's fixed costs count as they would in a short real run, not in a 5 s one).
# With >= 16 CPUs: nanoGPT on cores 0-3 (variants one after the other), the CPU workloads in
# two lanes whose three variants run at once on two cores each (the launcher beside its
# training, not on its core), rotated round by round (benchmarks/overhead.py --concurrent).
# Usage: bash benchmarks/h100_session59.sh OUTDIR [END_S: start no round after this many seconds]
out=${1:?outdir}; end=${2:-540}
source benchmarks/device_prelude.sh
python3 -c "import torch, sys, textual, transformers, lightning; print('torch', torch.__version__, 'python', sys.version.split()[0], 'transformers', transformers.__version__, 'lightning', lightning.__version__)"
SECONDS=0
lane() {  # name cores-a cores-b cores-c case[:steps]...  (the lane's time shared among its cases)
    local name=$1 a=$2 b=$3 c=$4; shift 4
    local left=$#
    for spec in "$@"; do
        local case=${spec%%:*} steps=${spec#*:}; [ "$steps" = "$spec" ] && steps=
        local limit=$(( (end - 30 - SECONDS) / left )); left=$((left - 1))
        CUDA_VISIBLE_DEVICES= python3 benchmarks/overhead.py --models "$case" ${steps:+--steps $steps} --repeats 40 \
            --variants bare mpsprof mpsprof-no-ops --concurrent "$a" "$b" "$c" --time-limit "$limit" \
            --json "$out/$case.json" > "$out/$case.txt" 2>&1
        echo "$name $case rc $? (${SECONDS}s)"
    done
}
if [ "$ncpu" -ge 16 ]; then
    lane A 4,5 6,7 8,9 mlp-1ms:12000 mlp-0.2ms:36000 mlp-5ms:3000 &
    lane B 10,11 12,13 14,15 hf:600 lightning:1800 &
    gpu_cores=0-3
else
    gpu_cores=0-$((ncpu - 1))
fi
taskset -c "$gpu_cores" python3 benchmarks/overhead.py --device cuda --models gpt-bf16 --steps 2000 --repeats 12 \
    --variants bare mpsprof mpsprof-no-ops --time-limit "$((end - 60))" --json "$out/gpt_bf16.json" > "$out/gpt_bf16.txt" 2>&1
echo "gpt rc $? (${SECONDS}s)"
wait
for f in "$out"/*.txt; do
    echo "== $f"; grep -v "round [0-9]*/" "$f" | grep -v "Warning\|warn(\|litlogger\|TPU\|HPU\|max_steps" | tail -n 14
done
