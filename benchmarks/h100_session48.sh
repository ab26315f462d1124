#!/bin/bash
# Session 48's device call: the harm check of the compiled, checkpointed attention block
# (`tests/scripts_compile/checkpointed_attention.py`: before this session's fix, a run under
# mpsprof crashed in its first sampled step with "There was no rule registered for
# HigherOrderOperator run_and_save_rng_state") on inductor and aot_eager, bare and under
# `mpsprof run --headless`, then the GPU tests and `mpsprof doctor`.
# Usage: bash benchmarks/h100_session48.sh OUTDIR   (DEV=cpu for a dry run of the check without a GPU)
# Each part has its own timeout and the whole script stops starting parts after BUDGET_S (default 520 s).
out=${1:?outdir}; dev=${DEV:-cuda}; budget=${BUDGET_S:-520}
mkdir -p "$out"
export OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
work=/tmp/session48; rm -rf "$work"; mkdir -p "$work"
SECONDS=0
# cap: the timeout of a part, at most what is left of the budget (min 5 s)
cap() { local left=$((budget - SECONDS)); [ "$left" -lt 5 ] && left=5; [ "$1" -lt "$left" ] && echo "$1" || echo "$left"; }

echo "=== machine"
nvidia-smi -L; nproc
python3 -c "import torch, sys; print('torch', torch.__version__, 'python', sys.version.split()[0], 'cuda', torch.version.cuda)"
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-deps .whl/*.whl 2>&1 | tail -n 3; echo "wheels rc ${PIPESTATUS[0]}"
fi

# $1 backend, $2 timeout: bare run, then under mpsprof; exit codes, step lines, summary block
ckpt() {
    local be=$1 t=$2 d=$work/ckpt_$1
    mkdir -p "$d"
    local args=(tests/scripts_compile/checkpointed_attention.py --device "$dev" --backend "$be" --steps 8)
    echo; echo "=== checkpointed_attention --backend $be (t=${SECONDS}s)"
    timeout "$(cap "$t")" python3 "${args[@]}" > "$d/bare.out" 2> "$d/bare.err"; local rb=$?
    timeout "$(cap "$t")" python3 -m mpsprofiler run --headless -o "$d/ckpt_run" "${args[@]}" > "$d/mps.out" 2> "$d/mps.err"; local rm_=$?
    echo "exit codes: bare $rb  mpsprof $rm_  (t=${SECONDS}s)"
    grep -E '^step [0-9]+: loss' "$d/bare.out" > "$d/bare.steps"; grep -E '^step [0-9]+: loss' "$d/mps.out" > "$d/mps.steps"
    echo "--- bare step lines ($(wc -l < "$d/bare.steps"))"; cat "$d/bare.steps"
    echo "--- mpsprof step lines ($(wc -l < "$d/mps.steps"))"; cat "$d/mps.steps"
    if [ -s "$d/bare.steps" ] && cmp -s "$d/bare.steps" "$d/mps.steps"; then echo "STEP LINES IDENTICAL"
    else echo "STEP LINES DIFFER:"; diff "$d/bare.steps" "$d/mps.steps"; fi
    [ "$rb" -ne 0 ] && { echo "--- bare stderr tail"; tail -n 15 "$d/bare.err"; }
    echo "--- mpsprof summary"
    if grep -q '^── mpsprof' "$d/mps.err"; then sed -n '/^── mpsprof/,$p' "$d/mps.err"
    elif grep -q '^── mpsprof' "$d/mps.out"; then echo "(on stdout)"; sed -n '/^── mpsprof/,$p' "$d/mps.out"
    else echo "(no summary block) mpsprof stderr tail:"; tail -n 30 "$d/mps.err"; fi
    grep -n "no rule registered\|run_and_save_rng_state\|Traceback" "$d/mps.err" "$d/mps.out" | head -n 8
}
ckpt inductor 110
ckpt aot_eager 60

echo; echo "=== timed gpu tests (t=${SECONDS}s)"
timeout "$(cap 150)" python3 -m pytest -q -p no:cacheprovider -m gpu \
    tests/e2e/test_gpu_health.py tests/e2e/test_gpu_host.py > "$out/gpu_timed.txt" 2>&1
echo "timed gpu tests rc $?"; tail -n 15 "$out/gpu_timed.txt"

echo; echo "=== gpu tests -n 3 (t=${SECONDS}s)"
timeout "$(cap 200)" python3 -m pytest -q -p no:cacheprovider -m gpu -n 3 \
    tests/e2e/test_gpu.py tests/unit/test_ops_accounting.py tests/unit/test_ops_mode_hop.py > "$out/gpu.txt" 2>&1
echo "gpu tests rc $?"; tail -n 25 "$out/gpu.txt"

echo; echo "=== doctor (t=${SECONDS}s)"
timeout 30 python3 -m mpsprofiler doctor > "$out/doctor.txt" 2>&1; echo "doctor rc $?"; cat "$out/doctor.txt"

tar -czf "$out/ckpt.tar.gz" -C "$work" . 2>/dev/null
[ "$(stat -c %s "$out/ckpt.tar.gz")" -gt 15000000 ] && tar -czf "$out/ckpt.tar.gz" -C "$work" --exclude=ckpt_run . 2>/dev/null
echo; echo "=== done in ${SECONDS}s"
