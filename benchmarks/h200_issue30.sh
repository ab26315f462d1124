#!/bin/bash
# Issue 30 on the H200 host, one device call: the GPU tests (tests/e2e/test_gpu_host.py: the
# launch-bound MLP, the pageable-copy CNN, the clean bf16 CNN; tests/e2e/test_gpu.py), their
# figures (H30_FIGURES), then the two fixes measured: `try` of pin_memory on the pageable CNN
# (5 pairs) and the launch-bound MLP at batch 16 and 128 (the host-bound fix: more work per
# launch; `try` has no batch setting, so the script reads BATCH).
# Usage: bash benchmarks/h200_issue30.sh OUTDIR
out=${1:?outdir}
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi -L
python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"
H30_FIGURES=$out/h30.json timeout 300 python3 -m pytest -q -p no:cacheprovider -m gpu \
    tests/e2e/test_gpu_host.py tests/e2e/test_gpu.py 2>&1 | tail -n 30
STEPS=80 timeout 200 python3 -m mpsprofiler try --set dataloader.1.pin_memory=true --steps 60 --pairs 5 \
    -o /tmp/try-pin tests/scripts_gpu/pageable_cnn.py > "$out/try_pin.txt" 2>&1
tail -n 25 "$out/try_pin.txt"
for b in 16 128; do
  BATCH=$b timeout 60 python3 -m mpsprofiler run --headless -o /tmp/lb$b tests/scripts_gpu/launch_bound_mlp.py \
      > "$out/lb$b.txt" 2>&1
  python3 - /tmp/lb$b $b <<'PY'
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
print("batch", sys.argv[2], "median step ms", round(s["steps"]["median_s"] * 1e3, 3),
      "findings", [f["rule"] for f in s["findings"]])
PY
done
