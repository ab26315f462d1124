#!/bin/bash
# Session 51's device call (issues 34, 28): every GPU test with this session's code (new:
# anomaly detection on CUDA, whose NaN checks are device reads; the probe's sampled fetch
# clocks and index timing since session 49's call), then nanoGPT in bf16 bare / mpsprof /
# --no-ops in interleaved rounds (total loop time, `overhead.py`).
# Usage: bash benchmarks/h100_session51.sh OUTDIR [GPT_TIME_LIMIT_S]
out=${1:?outdir}; limit=${2:-150}
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi -L; nproc; python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-deps .whl/*.whl 2>&1 | tail -n 3; echo "wheels rc ${PIPESTATUS[0]}"
fi
SECONDS=0
timeout 390 python3 -m pytest -q -p no:cacheprovider -m gpu --durations=8 \
    tests/e2e/test_gpu.py tests/e2e/test_gpu_health.py tests/e2e/test_gpu_host.py > "$out/gpu_tests.txt" 2>&1
echo "gpu tests rc $? (${SECONDS}s)"; grep -E "passed|failed|FAILED|Error" "$out/gpu_tests.txt" | tail -n 20
python3 benchmarks/overhead.py --device cuda --models gpt-bf16 --steps 600 --repeats 6 \
    --variants bare mpsprof mpsprof-no-ops --time-limit "$limit" --json "$out/gpt_bf16.json" > "$out/gpt_bf16.txt" 2>&1
echo "gpt rc $? (${SECONDS}s)"; grep -v "round [0-9]*/" "$out/gpt_bf16.txt" | tail -n 16
