#!/bin/bash
# Session 43's device call (issues 34 and 28): the probe's cost measured in one process
# (fw_step_cost.py: installed and removed in rotated blocks, so the host's run-to-run speed,
# which swung whole runs by 10-35% in earlier calls, cancels) beside whole interleaved runs
# (overhead.py). Three lanes on cores of their own: nanoGPT bf16 on the GPU (cores 0-7),
# the HF Trainer and Lightning (8-11), the CPU MLP at 1 ms and 0.2 ms (12-15); CUDA hidden
# from the CPU lanes.
# Usage: bash benchmarks/h200_session43.sh OUTDIR [LANE_TIME_LIMIT_S]
out=${1:?outdir}; limit=${2:-480}
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi -L; python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"
( taskset -c 8-11 env CUDA_VISIBLE_DEVICES= python3 benchmarks/fw_step_cost.py --framework hf --rounds 12 \
    --json "$out/fw_hf.json" > "$out/fw.txt" 2>&1
  taskset -c 8-11 env CUDA_VISIBLE_DEVICES= python3 benchmarks/fw_step_cost.py --framework lightning --rounds 20 \
    --json "$out/fw_l.json" >> "$out/fw.txt" 2>&1
  taskset -c 8-11 env CUDA_VISIBLE_DEVICES= python3 benchmarks/overhead.py --models hf --steps 600 --repeats 5 \
    --variants bare mpsprof mpsprof-no-ops --time-limit $((limit - 200)) --json "$out/hf.json" >> "$out/fw.txt" 2>&1 ) &
( taskset -c 12-15 env CUDA_VISIBLE_DEVICES= python3 benchmarks/step_cost.py --width 256 --only ladder \
    --variants full --rounds 12 --json "$out/sc256.json" > "$out/mlp.txt" 2>&1
  taskset -c 12-15 env CUDA_VISIBLE_DEVICES= python3 benchmarks/step_cost.py --width 32 --only ladder \
    --variants full --rounds 12 --json "$out/sc32.json" >> "$out/mlp.txt" 2>&1
  taskset -c 12-15 env CUDA_VISIBLE_DEVICES= python3 benchmarks/overhead.py --models mlp-1ms mlp-0.2ms --repeats 5 \
    --variants bare mpsprof mpsprof-no-ops --time-limit $((limit - 200)) --json "$out/mlp.json" >> "$out/mlp.txt" 2>&1 ) &
taskset -c 0-7 python3 benchmarks/fw_step_cost.py --framework gpt --rounds 20 --json "$out/fw_gpt.json" > "$out/gpt.txt" 2>&1
taskset -c 0-7 python3 benchmarks/overhead.py --device cuda --models gpt-bf16 --steps 600 --repeats 6 \
    --variants bare mpsprof mpsprof-no-ops torch.profiler --time-limit $((limit - 60)) --json "$out/gpt.json" >> "$out/gpt.txt" 2>&1
echo "gpt rc $?"
wait
tail -n 12 "$out/gpt.txt"; tail -n 30 "$out/fw.txt"; tail -n 30 "$out/mlp.txt"
