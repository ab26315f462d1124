#!/bin/bash
# Session 43's second device call (issues 34 and 28), after op accounting learned a
# framework's announced run length: nanoGPT bf16 on the GPU (cores 0-7) in one process
# (fw_step_cost.py; block means, see its summarize) and in whole interleaved runs; the HF
# Trainer's 200-step run (one early sample now) and Lightning in whole runs (cores 8-11);
# both frameworks in one process (cores 12-15). CUDA hidden from the CPU lanes.
# Usage: bash benchmarks/h200_session43b.sh OUTDIR [LANE_TIME_LIMIT_S]
out=${1:?outdir}; limit=${2:-420}
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi -L; python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"
( taskset -c 8-11 env CUDA_VISIBLE_DEVICES= python3 benchmarks/overhead.py --models hf --steps 200 --repeats 6 \
    --variants bare mpsprof mpsprof-no-ops --time-limit $((limit * 2 / 3)) --json "$out/hf.json" > "$out/fw_runs.txt" 2>&1
  taskset -c 8-11 env CUDA_VISIBLE_DEVICES= python3 benchmarks/overhead.py --models lightning --steps 600 --repeats 5 \
    --variants bare mpsprof mpsprof-no-ops --time-limit $((limit / 3)) --json "$out/lightning.json" >> "$out/fw_runs.txt" 2>&1 ) &
( taskset -c 12-15 env CUDA_VISIBLE_DEVICES= python3 benchmarks/fw_step_cost.py --framework lightning --rounds 30 \
    --json "$out/fw_l.json" > "$out/fw_blocks.txt" 2>&1
  taskset -c 12-15 env CUDA_VISIBLE_DEVICES= python3 benchmarks/fw_step_cost.py --framework hf --rounds 16 \
    --json "$out/fw_hf.json" >> "$out/fw_blocks.txt" 2>&1 ) &
taskset -c 0-7 python3 benchmarks/fw_step_cost.py --framework gpt --rounds 16 --json "$out/fw_gpt.json" > "$out/gpt.txt" 2>&1
taskset -c 0-7 python3 benchmarks/overhead.py --device cuda --models gpt-bf16 --steps 600 --repeats 6 \
    --variants bare mpsprof mpsprof-no-ops --time-limit $((limit - 60)) --json "$out/gpt.json" >> "$out/gpt.txt" 2>&1
echo "gpt rc $?"
wait
grep -v "round [0-9]*/" "$out/gpt.txt" | tail -n 30; grep -A12 "rounds of" "$out/fw_blocks.txt"; grep -v "round [0-9]*/" "$out/fw_runs.txt" | grep -v "Warning\|warn\|litlogger\|TPU\|GPU\|HPU\|max_steps" | tail -n 24
