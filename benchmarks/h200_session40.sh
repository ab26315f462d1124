#!/bin/bash
# One device call on the H200 host (issues 30, 34, 28): the GPU tests (the CUDA path of
# every probe change since they last ran, and the new loss ring and copy-time tests), then
# nanoGPT in bf16 bare / mpsprof / --no-ops in interleaved rounds, while the HF Trainer and
# Lightning loops run bare / mpsprof / --no-ops on cores of their own (CUDA hidden).
# Usage: bash benchmarks/h200_session40.sh OUTDIR [GPT_TIME_LIMIT_S]
out=${1:?outdir}; limit=${2:-100}
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi -L; python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"
( taskset -c 10-12 env CUDA_VISIBLE_DEVICES= python3 benchmarks/overhead.py --models hf --steps 300 --repeats 5 \
    --variants bare mpsprof mpsprof-no-ops --time-limit 280 --json "$out/hf.json" > "$out/hf.txt" 2>&1 ) &
( taskset -c 13-15 env CUDA_VISIBLE_DEVICES= python3 benchmarks/overhead.py --models lightning --steps 800 --repeats 5 \
    --variants bare mpsprof mpsprof-no-ops --time-limit 280 --json "$out/lightning.json" > "$out/lightning.txt" 2>&1 ) &
# the timed GPU tests alone on the GPU (device busy share, the loss ring's host cost), then
# the others three at a time
H30_FIGURES=$out/h30.json timeout 150 taskset -c 0-9 python3 -m pytest -q -p no:cacheprovider -m gpu \
    tests/e2e/test_gpu_health.py tests/e2e/test_gpu_host.py > "$out/gpu_timed.txt" 2>&1
echo "timed gpu tests rc $?"; tail -n 12 "$out/gpu_timed.txt"
timeout 150 taskset -c 0-9 python3 -m pytest -q -p no:cacheprovider -m gpu -n 3 \
    tests/e2e/test_gpu.py tests/unit/test_ops_accounting.py > "$out/gpu.txt" 2>&1
echo "gpu tests rc $?"; tail -n 12 "$out/gpu.txt"
taskset -c 0-9 python3 benchmarks/overhead.py --device cuda --models gpt-bf16 --steps 600 --repeats 6 \
    --variants bare mpsprof mpsprof-no-ops --time-limit "$limit" --json "$out/gpt_bf16.json" > "$out/gpt_bf16.txt" 2>&1
echo "gpt rc $?"; tail -n 12 "$out/gpt_bf16.txt"
wait
tail -n 8 "$out/hf.txt" "$out/lightning.txt"
