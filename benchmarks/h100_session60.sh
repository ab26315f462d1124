#!/bin/bash
# Session 60's device calls (issues 34, 28): each workload alone on the host.
# The first call of session 60 (h100_session59.sh) ran its two CPU lanes and nanoGPT at once,
# each CPU variant of a round beside the others: the host's load reached 6.5 on 16 CPUs,
# nanoGPT's bare loop took 26.6-34.4 s where alone it took 17.4-18.4 s (session 59), and a CPU
# lane's bare runs moved by 13-24%. Here nothing runs beside the measured workload: its
# variants run one after another, interleaved round by round (benchmarks/overhead.py), pinned
# to two CPUs (the training and mpsprof's launcher) that `lscpu -e` shows on two physical cores.
# Usage: bash benchmarks/h100_session60.sh OUTDIR cpu|gpu [END_S: start no round after this]
out=${1:?outdir}; part=${2:?cpu or gpu}; end=${3:-540}
source benchmarks/device_prelude.sh
lscpu | grep -i "model name\|thread(s) per core\|core(s) per socket\|socket(s)\|MHz"
lscpu -e=CPU,CORE,SOCKET,NODE | head -n 20
SECONDS=0
left=1
run_case() {  # cores case steps [extra overhead.py arguments]: the case's share of the time left
    local cores=$1 case=$2 steps=$3; shift 3
    local limit=$(( (end - 60 - SECONDS) / left )); left=$((left > 1 ? left - 1 : 1))
    taskset -c "$cores" python3 benchmarks/overhead.py --models "$case" --steps "$steps" --repeats 12 \
        --variants bare mpsprof mpsprof-no-ops --time-limit "$limit" "$@" \
        --json "$out/$case.json" > "$out/$case.txt" 2>&1
    echo "$case rc $? (${SECONDS}s)"
}
if [ "$part" = cpu ]; then
    # two CPUs of different physical cores: the first CPU of core 1 and of core 2
    cores=$(lscpu -p=CPU,CORE | grep -v '^#' | awk -F, '$2==1 || $2==2 {if (!seen[$2]++) print $1}' | paste -sd,)
    [[ "$cores" == *,* ]] || cores=2,3
    echo "cores $cores"
    export CUDA_VISIBLE_DEVICES=
    # each case gets an equal share of what is left (overhead.py starts no round past it)
    left=4
    run_case "$cores" mlp-1ms 4000
    run_case "$cores" mlp-5ms 1000
    run_case "$cores" lightning 1200
    run_case "$cores" hf 300
else
    run_case 0-3 gpt-bf16 2000 --device cuda
fi
for f in "$out"/*.txt; do
    echo "== $f"; grep -v "round [0-9]*/" "$f" | grep -v "Warning\|warn(\|litlogger\|TPU\|HPU\|max_steps" | tail -n 14
done
