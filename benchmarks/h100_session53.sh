#!/bin/bash
# Session 53's first device call (issues 34, 28): the CPU workloads of issue 34 with the
# variants of each round run at the same time on core sets of their own, rotated round by
# round (benchmarks/overhead.py --concurrent: the host's drift, 10-30% between runs seconds
# apart on these vCPUs, hits a round's runs alike), two workloads at a time (cores 4-9 and
# 10-15); nanoGPT bf16 on the GPU meanwhile on cores 0-3, its variants one after the other.
# Usage: bash benchmarks/h100_session53.sh OUTDIR [END_S: start no round after this many seconds]
out=${1:?outdir}; end=${2:-480}
source benchmarks/device_prelude.sh
python3 -c "import torch, sys, textual, transformers, lightning; print('torch', torch.__version__, 'python', sys.version.split()[0], 'transformers', transformers.__version__, 'lightning', lightning.__version__)"
SECONDS=0
lane() {  # name cores-a cores-b cores-c case [steps]
    local name=$1 a=$2 b=$3 c=$4; shift 4
    for spec in "$@"; do
        local case=${spec%%:*} steps=${spec#*:}; [ "$steps" = "$spec" ] && steps=
        CUDA_VISIBLE_DEVICES= python3 benchmarks/overhead.py --models "$case" ${steps:+--steps $steps} --repeats 7 \
            --variants bare mpsprof mpsprof-no-ops --concurrent "$a" "$b" "$c" --time-limit "$((end - 60 - SECONDS))" \
            --json "$out/$case.json" > "$out/$case.txt" 2>&1
        echo "$name $case rc $? (${SECONDS}s)"
    done
}
if [ "$ncpu" -ge 16 ]; then
    lane A 4-5 6-7 8-9 mlp-0.2ms mlp-1ms mlp-5ms &
    lane B 10-11 12-13 14-15 hf:600 lightning:1200 &
    gpu_cores=0-3
else
    gpu_cores=0-$((ncpu - 1))
fi
taskset -c "$gpu_cores" python3 benchmarks/overhead.py --device cuda --models gpt-bf16 --steps 600 --repeats 8 \
    --variants bare mpsprof mpsprof-no-ops --time-limit "$((end - 60))" --json "$out/gpt_bf16.json" > "$out/gpt_bf16.txt" 2>&1
echo "gpt rc $? (${SECONDS}s)"
wait
for f in "$out"/*.txt; do
    echo "== $f"; grep -v "round [0-9]*/" "$f" | grep -v "Warning\|warn(\|litlogger\|TPU\|HPU\|max_steps" | tail -n 14
done
