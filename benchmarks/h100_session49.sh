#!/bin/bash
# Session 49's device call (issues 34, 28): the timed GPU tests, which the 150 s of session 48's
# call did not fit with one CPU (`nproc` 1 there), then nanoGPT in bf16 bare / mpsprof /
# --no-ops in interleaved rounds (total loop time, `overhead.py`), with this session's code:
# since session 47's figures the probe gained session 48's higher-order-operator pass-through,
# the sync's `via` and the loop's device names read at each sampled step's start.
# Usage: bash benchmarks/h100_session49.sh OUTDIR [GPT_TIME_LIMIT_S]
out=${1:?outdir}; limit=${2:-240}
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi -L; nproc; python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-deps .whl/*.whl 2>&1 | tail -n 3; echo "wheels rc ${PIPESTATUS[0]}"
fi
SECONDS=0
timeout 280 python3 -m pytest -q -p no:cacheprovider -m gpu --durations=8 \
    tests/e2e/test_gpu_health.py tests/e2e/test_gpu_host.py > "$out/gpu_timed.txt" 2>&1
echo "timed gpu tests rc $? (${SECONDS}s)"; tail -n 14 "$out/gpu_timed.txt"
python3 benchmarks/overhead.py --device cuda --models gpt-bf16 --steps 600 --repeats 6 \
    --variants bare mpsprof mpsprof-no-ops --time-limit "$limit" --json "$out/gpt_bf16.json" > "$out/gpt_bf16.txt" 2>&1
echo "gpt rc $? (${SECONDS}s)"; grep -v "round [0-9]*/" "$out/gpt_bf16.txt" | tail -n 16
