#!/bin/bash
# Issue 34 on the H200 host, alone on the machine: nanoGPT shakespeare-char as it trains
# (bf16 autocast, TF32; ~8 ms steps, compile off) bare, under mpsprof (defaults: op
# accounting on) and with --no-ops, interleaved rounds, total loop time
# (benchmarks/overhead.py). Usage: bash benchmarks/h200_overhead_gpt.sh OUTDIR [TIME_LIMIT_S]
out=${1:?outdir}; limit=${2:-300}
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
python3 benchmarks/overhead.py --device cuda --models gpt-bf16 --steps 600 --repeats 6 \
    --variants bare mpsprof mpsprof-no-ops --time-limit "$limit" --json "$out/gpt_bf16.json" 2>&1 | tee "$out/gpt_bf16.txt"
