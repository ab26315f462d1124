#!/bin/bash
# Session 52's first device call (issues 34, 28): the GPU anomaly test fixed after session 51's
# call, then every workload of issue 34 in lanes of their own cores when the host has them
# (nanoGPT bf16 on the GPU; the CPU MLP at 5, 1 and 0.2 ms steps, the HF Trainer and Lightning
# with CUDA hidden), each interleaving bare / mpsprof / --no-ops round by round
# (benchmarks/overhead.py, total loop time). On a host of fewer than 16 CPUs: nanoGPT alone.
# Usage: bash benchmarks/h100_session52.sh OUTDIR [LANE_TIME_LIMIT_S]
out=${1:?outdir}; limit=${2:-380}
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi -L; ncpu=$(nproc); echo "nproc $ncpu"; uptime
python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-deps .whl/*.whl 2>&1 | tail -n 3; echo "wheels rc ${PIPESTATUS[0]}"
fi
fw=$(python3 -c "import transformers, lightning" 2>/dev/null && echo yes || echo no); echo "frameworks: $fw"
SECONDS=0
timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/e2e/test_gpu.py -k anomaly > "$out/gpu_anomaly.txt" 2>&1
echo "anomaly gpu test rc $? (${SECONDS}s)"; tail -n 3 "$out/gpu_anomaly.txt"
lane() {  # cores case [extra overhead.py args...]
    local cores=$1 case=$2; shift 2
    taskset -c "$cores" env CUDA_VISIBLE_DEVICES= python3 benchmarks/overhead.py --models "$case" --repeats 8 \
        --variants bare mpsprof mpsprof-no-ops --time-limit "$limit" --json "$out/$case.json" "$@" > "$out/$case.txt" 2>&1
}
gpu_cores=0-3
if [ "$ncpu" -ge 16 ]; then
    lane 4-5 mlp-5ms & lane 6-7 mlp-1ms & lane 8-9 mlp-0.2ms &
    if [ "$fw" = yes ]; then lane 10-11 hf & lane 12-13 lightning & fi
elif [ "$ncpu" -lt 4 ]; then
    gpu_cores=0-$((ncpu - 1))
fi
taskset -c "$gpu_cores" python3 benchmarks/overhead.py --device cuda --models gpt-bf16 --steps 600 --repeats 8 \
    --variants bare mpsprof mpsprof-no-ops --time-limit "$limit" --json "$out/gpt_bf16.json" > "$out/gpt_bf16.txt" 2>&1
echo "gpt rc $? (${SECONDS}s)"
wait
for f in "$out"/*.txt; do
    [ "$f" = "$out/gpu_anomaly.txt" ] && continue
    echo "== $f"; grep -v "round [0-9]*/" "$f" | grep -v "Warning\|warn(\|litlogger\|TPU\|HPU\|max_steps" | tail -n 14
done
