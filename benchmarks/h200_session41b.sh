#!/bin/bash
# The second device call of session 41 (issues 34 and 28), after the second early sample
# became conditional: nanoGPT bf16 on the GPU (cores 0-7), the HF Trainer (cores 10-12) and
# the 5 ms MLP in a 2,000-step run (cores 13-15) in lanes of their own, each interleaving
# bare / mpsprof / --no-ops round by round (benchmarks/overhead.py).
# Usage: bash benchmarks/h200_session41b.sh OUTDIR [LANE_TIME_LIMIT_S]
out=${1:?outdir}; limit=${2:-420}
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"
( taskset -c 10-12 env CUDA_VISIBLE_DEVICES= python3 benchmarks/overhead.py --models hf --steps 300 --repeats 6 \
    --variants bare mpsprof mpsprof-no-ops --time-limit "$limit" --json "$out/hf.json" > "$out/hf.txt" 2>&1 ) &
( taskset -c 13-15 env CUDA_VISIBLE_DEVICES= python3 benchmarks/overhead.py --models mlp-5ms --steps 2000 --repeats 6 \
    --variants bare mpsprof mpsprof-no-ops --time-limit "$limit" --json "$out/mlp.json" > "$out/mlp.txt" 2>&1 ) &
taskset -c 0-7 python3 benchmarks/overhead.py --device cuda --models gpt-bf16 --steps 600 --repeats 7 \
    --variants bare mpsprof mpsprof-no-ops --time-limit "$limit" --json "$out/gpt.json" > "$out/gpt.txt" 2>&1
echo "gpt rc $?"
wait
tail -n 14 "$out/gpt.txt" "$out/hf.txt" "$out/mlp.txt"
