#!/bin/bash
# Session 59's second device call (issue 34): nanoGPT shakespeare-char in bf16, 2000 steps,
# bare / mpsprof (op accounting's default budget 0.3%) / mpsprof-baseline (77f611e, the
# 0.5% default; its package copied into .base/ and carried), interleaved, same rounds.
# Usage: bash benchmarks/h100_session59b.sh OUTDIR [END_S]
out=${1:?outdir}; end=${2:-500}
source benchmarks/device_prelude.sh
SECONDS=0
python3 benchmarks/overhead.py --device cuda --models gpt-bf16 --steps 2000 --repeats 12 \
    --variants bare mpsprof mpsprof-baseline --baseline .base --time-limit "$((end - 60))" \
    --json "$out/gpt_bf16_budget.json" > "$out/gpt_bf16_budget.txt" 2>&1
echo "gpt rc $? (${SECONDS}s)"
grep -v "round [0-9]*/" "$out/gpt_bf16_budget.txt" | tail -n 16
