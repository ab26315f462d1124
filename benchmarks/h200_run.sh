#!/bin/bash
# The issue-34 overhead benchmark on the H200 host, every workload in one call: the
# nanoGPT-like model on the GPU (cores 0-3) and the CPU workloads at the same time, each on
# its own two cores (taskset; the training and mpsprof's launcher share them), CUDA hidden
# from the CPU ones. Each case runs its variants in interleaved rounds (benchmarks/overhead.py).
# Usage: bash benchmarks/h200_run.sh OUTDIR [TIME_LIMIT_S]
out=${1:?outdir}; limit=${2:-400}
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
py=python3
tmp=$(mktemp -d)
nvidia-smi -L > "$tmp/00-gpu.txt" 2>&1
lscpu | grep -E "Model name|^CPU\(s\)" >> "$tmp/00-gpu.txt"
run() {  # name cores env... -- args...
  local name=$1 cores=$2; shift 2
  ( taskset -c "$cores" env "$@" > "$tmp/$name.txt" 2>&1; echo "rc $?" >> "$tmp/$name.txt" ) &
}
run gpt 0-3 $py benchmarks/overhead.py --device cuda --models gpt --steps 1500 --repeats 5 \
    --variants bare mpsprof mpsprof-no-ops --time-limit "$limit" --json "$tmp/gpt.json"
run mlp5 4-5 CUDA_VISIBLE_DEVICES= $py benchmarks/overhead.py --models mlp-5ms --steps 1000 --repeats 5 \
    --time-limit "$limit" --json "$tmp/mlp5.json"
run mlp1 6-7 CUDA_VISIBLE_DEVICES= $py benchmarks/overhead.py --models mlp-1ms --steps 5000 --repeats 5 \
    --time-limit "$limit" --json "$tmp/mlp1.json"
run mlp02 8-9 CUDA_VISIBLE_DEVICES= $py benchmarks/overhead.py --models mlp-0.2ms --steps 20000 --repeats 5 \
    --variants bare mpsprof mpsprof-no-ops --time-limit "$limit" --json "$tmp/mlp02.json"
run hf 10-11 CUDA_VISIBLE_DEVICES= $py benchmarks/overhead.py --models hf --steps 800 --repeats 5 \
    --variants bare mpsprof mpsprof-no-ops --time-limit "$limit" --json "$tmp/hf.json"
run lightning 12-13 CUDA_VISIBLE_DEVICES= $py benchmarks/overhead.py --models lightning --steps 1500 --repeats 5 \
    --variants bare mpsprof mpsprof-no-ops --time-limit "$limit" --json "$tmp/lightning.json"
wait
for f in "$tmp"/*.txt; do echo "=== $(basename "$f")"; cat "$f"; done > "$out/all.txt"
$py - "$tmp" "$out/results.json" <<'PY'
import json, sys, pathlib
tmp = pathlib.Path(sys.argv[1])
doc = {p.stem: json.loads(p.read_text()) for p in sorted(tmp.glob("*.json"))}
pathlib.Path(sys.argv[2]).write_text(json.dumps(doc, indent=1))
PY
