#!/bin/bash
# Session 61's device calls (issue 34): the DataLoader fetch clock's new schedule
# (probe/cputime.py READ_AFTER, READ_GAPS) against the version before it (af77b77's package
# copied into .base/mpsprofiler and carried), on the device host's CPU and GPU.
# cpu: in-process per-step cost (benchmarks/step_cost.py: this version's full probe and the
#      baseline's in the same rotated rounds, wall and thread CPU time) at widths 32 and 256,
#      then whole runs of the 1 ms and 0.2 ms MLPs, bare / mpsprof / mpsprof-baseline,
#      interleaved, pinned to two CPUs of different cores.
# gpu: nanoGPT in bf16, 1,200 steps, bare / mpsprof / --no-ops / mpsprof-baseline, interleaved.
# Usage: bash benchmarks/h100_session61.sh OUTDIR cpu|gpu [END_S: start no round after this]
out=${1:?outdir}; part=${2:?cpu or gpu}; end=${3:-540}
source benchmarks/device_prelude.sh
lscpu | grep -i "model name\|thread(s) per core\|core(s) per socket\|MHz"
SECONDS=0
if [ "$part" = cpu ]; then
    cores=$(lscpu -p=CPU,CORE | grep -v '^#' | awk -F, '$2==1 || $2==2 {if (!seen[$2]++) print $1}' | paste -sd,)
    [[ "$cores" == *,* ]] || cores=2,3
    first=${cores%%,*}
    echo "cores $cores"
    export CUDA_VISIBLE_DEVICES=
    for w in 32 256; do
        for clock in wall cpu; do
            taskset -c "$first" python3 benchmarks/step_cost.py --only ladder --variants full "baseline full" \
                --baseline .base/mpsprofiler --width "$w" --rounds 30 $([ $clock = cpu ] && echo --cpu) \
                > "$out/ladder_${clock}_w$w.txt" 2>&1
            echo "ladder $clock width $w rc $? (${SECONDS}s)"
        done
    done
    left=2
    for spec in mlp-1ms:3000 mlp-0.2ms:12000; do
        case=${spec%%:*} steps=${spec#*:}
        limit=$(( (end - 40 - SECONDS) / left )); left=1
        taskset -c "$cores" python3 benchmarks/overhead.py --models "$case" --steps "$steps" --repeats 20 \
            --variants bare mpsprof mpsprof-baseline --baseline .base --time-limit "$limit" \
            --json "$out/$case.json" > "$out/$case.txt" 2>&1
        echo "$case rc $? (${SECONDS}s)"
    done
else
    python3 benchmarks/overhead.py --device cuda --models gpt-bf16 --steps 1200 --repeats 12 \
        --variants bare mpsprof mpsprof-no-ops mpsprof-baseline --baseline .base --time-limit "$((end - 60))" \
        --json "$out/gpt_bf16.json" > "$out/gpt_bf16.txt" 2>&1
    echo "gpt rc $? (${SECONDS}s)"
fi
for f in "$out"/*.txt; do
    echo "== $f"; grep -v "round [0-9]*/" "$f" | tail -n 12
done
