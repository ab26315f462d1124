#!/bin/bash
# Session 46's device call (issues 34, 28): the GPU tests with this session's probe and
# diagnosis changes (the model event's default dtype, library lines by package path), an
# LBFGS loop on CUDA (its own syncs: the `sync-heavy` fix must say they are torch's), then
# nanoGPT in bf16 bare / mpsprof / --no-ops in interleaved rounds (total loop time).
# Usage: bash benchmarks/h100_session46.sh OUTDIR [GPT_TIME_LIMIT_S]
out=${1:?outdir}; limit=${2:-240}
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi -L; nproc; python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0])"
H30_FIGURES=$out/h30.json timeout 150 taskset -c 0-9 python3 -m pytest -q -p no:cacheprovider -m gpu \
    tests/e2e/test_gpu_health.py tests/e2e/test_gpu_host.py > "$out/gpu_timed.txt" 2>&1
echo "timed gpu tests rc $?"; tail -n 6 "$out/gpu_timed.txt"
timeout 180 taskset -c 0-9 python3 -m pytest -q -p no:cacheprovider -m gpu -n 3 \
    tests/e2e/test_gpu.py tests/unit/test_ops_accounting.py > "$out/gpu.txt" 2>&1
echo "gpu tests rc $?"; tail -n 12 "$out/gpu.txt"
cat > "$out/lbfgs_cuda.py" <<'PY'
import torch
torch.manual_seed(0)
x = torch.randn(4096, 64, device="cuda"); y = x @ torch.randn(64, 1, device="cuda")
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.Tanh(), torch.nn.Linear(256, 1)).cuda()
opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=5)
def closure():
    opt.zero_grad(); loss = torch.nn.functional.mse_loss(model(x), y); loss.backward(); return loss
for it in range(20):
    loss = opt.step(closure)
print("loss", round(loss.item(), 5))
PY
timeout 120 python3 -m mpsprofiler run --headless -o "$out/lbfgs_run" "$out/lbfgs_cuda.py" > "$out/lbfgs.txt" 2>&1
echo "lbfgs rc $?"; sed -n '/── mpsprof/,$p' "$out/lbfgs.txt" | head -12
timeout 60 python3 -m mpsprofiler report "$out/lbfgs_run" --format md | sed -n '/Fix:/,/References/p' | head -12
taskset -c 0-9 python3 benchmarks/overhead.py --device cuda --models gpt-bf16 --steps 600 --repeats 6 \
    --variants bare mpsprof mpsprof-no-ops --time-limit "$limit" --json "$out/gpt_bf16.json" > "$out/gpt_bf16.txt" 2>&1
echo "gpt rc $?"; grep -v "round [0-9]*/" "$out/gpt_bf16.txt" | tail -n 14
