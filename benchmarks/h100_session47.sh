#!/bin/bash
# Session 47's device call (issues 34, 28): the GPU tests (the LBFGS test of session 46 had not
# run on a GPU yet), then nanoGPT in bf16 bare / mpsprof / --no-ops / torch.profiler in
# interleaved rounds (total loop time, `overhead.py`).
# Usage: bash benchmarks/h100_session47.sh OUTDIR [GPT_TIME_LIMIT_S]
out=${1:?outdir}; limit=${2:-300}
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi -L; nproc; python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"
H30_FIGURES=$out/h30.json timeout 150 taskset -c 0-9 python3 -m pytest -q -p no:cacheprovider -m gpu \
    tests/e2e/test_gpu_health.py tests/e2e/test_gpu_host.py > "$out/gpu_timed.txt" 2>&1
echo "timed gpu tests rc $?"; tail -n 6 "$out/gpu_timed.txt"
timeout 200 taskset -c 0-9 python3 -m pytest -q -p no:cacheprovider -m gpu -n 3 \
    tests/e2e/test_gpu.py tests/unit/test_ops_accounting.py > "$out/gpu.txt" 2>&1
echo "gpu tests rc $?"; tail -n 12 "$out/gpu.txt"
taskset -c 0-9 python3 benchmarks/overhead.py --device cuda --models gpt-bf16 --steps 600 --repeats 6 \
    --variants bare mpsprof mpsprof-no-ops torch.profiler --time-limit "$limit" --json "$out/gpt_bf16.json" > "$out/gpt_bf16.txt" 2>&1
echo "gpt rc $?"; grep -v "round [0-9]*/" "$out/gpt_bf16.txt" | tail -n 16
