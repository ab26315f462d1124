#!/bin/bash
# One device call on the H200 host (issues 34 and 28), three lanes at once on cores of their
# own: nanoGPT in bf16 on the GPU (bare / mpsprof / --no-ops / torch.profiler), the CPU MLP
# at its three step sizes, and the HF Trainer and Lightning loops (CUDA hidden from both CPU
# lanes). Each lane interleaves its variants round by round (benchmarks/overhead.py) and
# reports the loop's wall time and the training process's CPU time.
# Usage: bash benchmarks/h200_session41.sh OUTDIR [LANE_TIME_LIMIT_S]
out=${1:?outdir}; limit=${2:-420}
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi -L; python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"
lscpu | grep -E "^(Model name|Thread|Core|Socket|CPU\(s\))" ; lscpu -e=CPU,CORE 2>/dev/null | head -20
( taskset -c 6-10 env CUDA_VISIBLE_DEVICES= python3 benchmarks/overhead.py --models mlp-5ms --repeats 5 \
    --variants bare mpsprof mpsprof-no-ops torch.profiler --time-limit 120 --json "$out/mlp5.json" > "$out/mlp.txt" 2>&1
  taskset -c 6-10 env CUDA_VISIBLE_DEVICES= python3 benchmarks/overhead.py --models mlp-1ms mlp-0.2ms --repeats 5 \
    --variants bare mpsprof mpsprof-no-ops --time-limit $((limit - 140)) --json "$out/mlp1.json" >> "$out/mlp.txt" 2>&1 ) &
( taskset -c 11-15 env CUDA_VISIBLE_DEVICES= python3 benchmarks/overhead.py --models hf --steps 300 --repeats 5 \
    --variants bare mpsprof mpsprof-no-ops --time-limit $((limit / 2)) --json "$out/hf.json" > "$out/fw.txt" 2>&1
  taskset -c 11-15 env CUDA_VISIBLE_DEVICES= python3 benchmarks/overhead.py --models lightning --steps 800 --repeats 5 \
    --variants bare mpsprof mpsprof-no-ops --time-limit $((limit / 3)) --json "$out/lightning.json" >> "$out/fw.txt" 2>&1 ) &
taskset -c 0-5 python3 benchmarks/overhead.py --device cuda --models gpt-bf16 --steps 600 --repeats 6 \
    --variants bare mpsprof mpsprof-no-ops torch.profiler --time-limit "$limit" --json "$out/gpt.json" > "$out/gpt.txt" 2>&1
echo "gpt rc $?"
wait
tail -n 14 "$out/gpt.txt" "$out/mlp.txt" "$out/fw.txt"
