#!/bin/bash
# Session 45's device call (issues 34 and 28): every workload of issue 34 in one call, each
# lane on cores of its own and interleaving bare / mpsprof / --no-ops round by round
# (benchmarks/overhead.py, total loop time): nanoGPT bf16 on the GPU (cores 0-7), the CPU
# MLP at 1 and 0.2 ms steps (cores 8-9, 10-11), the HF Trainer (12-13) and Lightning
# (14-15); CUDA hidden from the CPU lanes. A CPU lane's two cores hold its
# training and its launcher, as on a 2-core machine, and nothing else.
# Usage: bash benchmarks/h200_session45.sh OUTDIR [LANE_TIME_LIMIT_S]
out=${1:?outdir}; limit=${2:-420}
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi -L; nproc; python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"
fw=$(python3 -c "import transformers, lightning" 2>/dev/null && echo yes || echo no); echo "frameworks: $fw"
for lane in "8-9 mlp-1ms" "10-11 mlp-0.2ms"; do
  set -- $lane
  ( taskset -c "$1" env CUDA_VISIBLE_DEVICES= python3 benchmarks/overhead.py --models "$2" --repeats 6 \
      --variants bare mpsprof mpsprof-no-ops --time-limit "$limit" --json "$out/$2.json" > "$out/$2.txt" 2>&1 ) &
done
if [ "$fw" = yes ]; then
  for lane in "12-13 hf" "14-15 lightning"; do
    set -- $lane
    ( taskset -c "$1" env CUDA_VISIBLE_DEVICES= python3 benchmarks/overhead.py --models "$2" --repeats 6 \
        --variants bare mpsprof mpsprof-no-ops --time-limit "$limit" --json "$out/$2.json" > "$out/$2.txt" 2>&1 ) &
  done
fi
taskset -c 0-7 python3 benchmarks/overhead.py --device cuda --models gpt-bf16 --steps 600 --repeats 7 \
    --variants bare mpsprof mpsprof-no-ops --time-limit "$limit" --json "$out/gpt.json" > "$out/gpt.txt" 2>&1
echo "gpt rc $?"
wait
for f in "$out"/*.txt; do [ -f "$f" ] && { echo "== $f"; grep -v "round [0-9]*/" "$f" | grep -v "Warning\|warn(\|litlogger\|TPU\|HPU\|max_steps" | tail -n 16; }; done
