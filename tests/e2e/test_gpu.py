"""The CUDA path on a real GPU: memory figures, idle detection, syncs, crash findings.

Marked ``gpu`` and skipped where torch sees no CUDA device, so CI (CPU only) stays green;
run on a GPU machine with ``python -m pytest -m gpu``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from helpers import child_env, loud_rules, mpsprof_cli, read_summary
from mpsprofiler.session.recording import load_run
from torch_facts import has_mps_kernel

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

HERE = Path(__file__).parent.parent
REPO = HERE.parent


def run(tmp_path: Path, script: Path, *args: str, env: dict | None = None):
    run_dir = tmp_path / script.stem
    proc = mpsprof_cli("run", "--headless", "-o", str(run_dir), str(script), *args,
                       env=child_env(**(env or {})), timeout=300, stdin=None)
    return proc, read_summary(run_dir), run_dir


def rules_of(summary: dict) -> set[str]:
    return {f["rule"] for f in summary["findings"]}


def test_cuda_memory_figures_and_stall(tmp_path):
    proc, summary, _ = run(tmp_path, REPO / "examples" / "slow_dataloader.py", "--steps", "40", env={"ML_DEVICE": "cuda"})
    assert proc.returncode == 0, proc.stderr
    assert summary["device"]["kind"] == "cuda"
    mem = summary["memory"]
    assert mem["peak_device_allocated"] > 0
    assert mem["peak_device_cached"] >= mem["peak_device_allocated"]
    assert mem["device_total"] == torch.cuda.get_device_properties(0).total_memory
    assert "dataloader-stall" in rules_of(summary) or "dataloader-stall-critical" in rules_of(summary)


@pytest.mark.parametrize("mode", ["idle", "busy"])
def test_cuda_idle_while_waiting(tmp_path, mode):
    proc, summary, run_dir = run(tmp_path, HERE / "scripts_gpu" / "idle_gpu.py", env={"MODE": mode})
    assert proc.returncode == 0, proc.stderr
    steps = load_run(run_dir).session.steps
    if mode == "idle":
        assert steps.idle_waits > 3 * max(steps.busy_waits, 1)
    else:
        assert steps.busy_waits > 3 * max(steps.idle_waits, 1)


def test_cuda_syncs_per_step(tmp_path):
    proc, summary, _ = run(tmp_path, REPO / "examples" / "sync_heavy.py", "--steps", "30", env={"ML_DEVICE": "cuda"})
    assert proc.returncode == 0, proc.stderr
    assert "sync-heavy" in rules_of(summary)


def test_cuda_device_mismatch_names_the_line(tmp_path):
    script = HERE / "scripts_gpu" / "mismatch_cuda.py"
    proc, summary, _ = run(tmp_path, script)
    assert proc.returncode == 1
    assert "Expected all tensors to be on the same device" in proc.stderr
    finding = next(f for f in summary["findings"] if f["rule"] == "device-mismatch-crash")
    assert f"{script.name}:10" in finding["evidence"] + finding["fix"]


def test_cuda_out_of_memory(tmp_path):
    proc, summary, _ = run(tmp_path, HERE / "scripts_gpu" / "oom_cuda.py")
    assert proc.returncode == 1
    assert "CUDA out of memory" in proc.stderr
    assert "oom-crash-cuda" in rules_of(summary)


# example -> rules its CUDA run must raise (beyond running cleanly on the GPU)
EXAMPLES_ON_CUDA = {
    "clean_compute": set(),
    "mps_clean": set(),
    # CTC loss with MPS kernels in this torch's native_functions.yaml: nothing to predict
    "ctc_gru": set() if has_mps_kernel("_ctc_loss") else {"mps-readiness"},
    "fallback_ops": {"mps-readiness"},
    "sync_heavy": {"sync-heavy"},
    "slow_dataloader": set(),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES_ON_CUDA))
def test_examples_on_cuda(tmp_path, name):
    """Every example runs on the GPU under the probe, unchanged, with the device's figures."""
    proc, summary, _ = run(tmp_path, REPO / "examples" / f"{name}.py", "--steps", "12", env={"ML_DEVICE": "cuda"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert summary["device"]["kind"] == "cuda"
    assert summary["steps"]["count"] >= 10
    assert summary["memory"]["peak_device_allocated"] > 0
    assert EXAMPLES_ON_CUDA[name] <= rules_of(summary), rules_of(summary)
    if name in ("clean_compute", "mps_clean"):
        assert loud_rules(summary) == []


def test_cpu_script_never_initialises_cuda(tmp_path):
    """The probe must not create a CUDA context (GPU memory, a device) for a CPU-only script."""
    script = tmp_path / "cpu_only.py"
    script.write_text(
        "import torch\n"
        "m = torch.nn.Linear(8, 8)\n"
        "opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for _ in range(20):\n"
        "    opt.zero_grad(); m(torch.randn(4, 8)).sum().backward(); opt.step()\n"
        "print('initialised', torch.cuda.is_initialized())\n"
    )
    proc, summary, _ = run(tmp_path, script)
    assert proc.returncode == 0, proc.stderr
    assert "initialised False" in proc.stdout
    assert summary["steps"]["count"] == 20


DIST = HERE / "scripts_dist" / "ddp_straggler.py"


def test_cuda_two_ranks_on_one_gpu_name_the_straggler(tmp_path):
    """gloo lets two ranks share one GPU: per-rank CUDA memory and the straggler, on a real GPU."""
    proc, summary, _ = _dist(tmp_path, "2", {"DEVICE": "cuda", "BACKEND": "gloo"})
    assert proc.returncode == 0, proc.stderr
    straggler = next(f for f in summary["findings"] if f["rule"] == "straggler-rank")
    assert straggler["facts"]["straggler_rank"] == 1 and straggler["facts"]["straggler_cause"] == "data wait"
    ranks = {r["rank"]: r for r in summary["ranks"]}
    assert set(ranks) == {0, 1}
    assert all(r["device"].startswith("cuda") and r["peak_memory"] > 0 for r in ranks.values())


def test_cuda_nccl_rank(tmp_path):
    """The NCCL code path with the GPUs this machine has (one rank per GPU)."""
    n = str(torch.cuda.device_count())
    proc, summary, _ = _dist(tmp_path, n, {"DEVICE": "cuda", "BACKEND": "nccl", "SLOW_RANK": "0"})
    assert proc.returncode == 0, proc.stderr
    assert len(summary["ranks"]) == int(n)
    assert all(r["steps"] == 30 for r in summary["ranks"])


@pytest.mark.multigpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_nccl_two_gpus_straggler(tmp_path):
    proc, summary, _ = _dist(tmp_path, "2", {"DEVICE": "cuda", "BACKEND": "nccl"})
    assert proc.returncode == 0, proc.stderr
    straggler = next(f for f in summary["findings"] if f["rule"] == "straggler-rank")
    assert straggler["facts"]["straggler_rank"] == 1


def _dist(tmp_path: Path, nproc: str, env: dict):
    run_dir = tmp_path / "dist"
    proc = mpsprof_cli("run", "--headless", "-o", str(run_dir), "--nproc-per-node", nproc, str(DIST),
                       env=child_env(**env), timeout=300, stdin=None)
    return proc, read_summary(run_dir), run_dir


# --------------------------------------------------------------------------- issue 17


def _line(script: Path, text: str) -> int:
    return next(i for i, line in enumerate(script.read_text().splitlines(), 1) if line.strip() == text)


def test_cuda_leaks_name_their_lines(tmp_path):
    """Leak-site attribution works on device memory too: the line that keeps CUDA tensors."""
    cache = HERE / "scripts_leaks" / "detached_cache.py"
    proc, summary, _ = run(tmp_path, cache, "--device", "cuda", "--steps", "30")
    assert proc.returncode == 0, proc.stderr
    found = {f["rule"]: f for f in summary["findings"]}
    assert "leak-site-container" in found, summary["findings"]
    assert f"detached_cache.py:{_line(cache, 'cache.append(h.detach().clone())')}" in found["leak-site-container"]["title"]
    total = HERE / "scripts_leaks" / "total_loss.py"
    proc, summary, _ = run(tmp_path, total, "--device", "cuda")
    assert proc.returncode == 0, proc.stderr
    found = {f["rule"]: f for f in summary["findings"]}
    assert "graph-kept-across-steps" in found, summary["findings"]
    assert f"total_loss.py:{_line(total, 'total_loss += loss')}" in found["graph-kept-across-steps"]["title"]


def test_nanogpt_on_cuda_predicts_no_sdpa_fallback(tmp_path):
    """cuDNN / flash attention and fused AdamW are CUDA kernels; a Mac runs SDPA's MPS path."""
    proc, summary, run_dir = run(tmp_path, HERE / "scripts_mac" / "nanogpt.py", "--device", "cuda")
    assert proc.returncode == 0, proc.stderr
    data = load_run(run_dir).session.ops.to_dict()
    ops = {o["op"] for o in data["ops"]}
    assert any("attention" in op and op != "aten::scaled_dot_product_attention" for op in ops), sorted(ops)
    assert data["mps_predicted"] == [], data["mps_predicted"]
    rules = rules_of(summary)
    assert "mps-readiness" not in rules and "sync-heavy" not in rules, summary["findings"]


def test_cuda_lbfgs_history_is_no_leak_and_its_syncs_are_torchs(tmp_path):
    """LBFGS keeps up to history_size tensors in its state on the device: no leak finding at
    the script's `opt.step(closure)`; its hundreds of reads per step are torch's own
    (torch/optim/lbfgs.py), and the fix says so."""
    script = tmp_path / "lbfgs_cuda.py"
    script.write_text(
        "import torch\n"
        "torch.manual_seed(0)\n"
        "x = torch.randn(4096, 64, device='cuda'); y = x @ torch.randn(64, 1, device='cuda')\n"
        "model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.Tanh(), torch.nn.Linear(256, 1)).cuda()\n"
        "opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=5)\n"
        "def closure():\n"
        "    opt.zero_grad(); loss = torch.nn.functional.mse_loss(model(x), y); loss.backward(); return loss\n"
        "for it in range(20):\n"
        "    loss = opt.step(closure)\n"
        "print('loss', round(loss.item(), 5))\n")
    proc, summary, _ = run(tmp_path, script)
    assert proc.returncode == 0, proc.stderr
    found = {f["rule"]: f for f in summary["findings"]}
    assert not {"leak-site-container", "leak-site-graph", "tensor-leak"} & set(found), summary["findings"]
    assert found["sync-heavy"]["fix"].startswith("These reads are torch's own, inside `torch.optim.LBFGS.step`")


def test_cuda_anomaly_detection_is_named_and_its_nan_checks_are_its_syncs(tmp_path):
    """Anomaly detection left on, on a CUDA GPU: torch's engine checks each backward op's
    output for NaN there (torch/csrc/autograd/engine.cpp, a device read each), so the run
    syncs at every backward op. The finding names the script's `set_detect_anomaly(True)`
    line; a sync finding, where one fires, says the reads are the NaN checks (not 'keep the
    values on the device'); the script's own output is bare's."""
    script = HERE / "scripts_anomaly" / "anomaly_train.py"
    proc, summary, _ = run(tmp_path, script, "--form", "set", "--device", "cuda")
    assert proc.returncode == 0, proc.stderr
    assert "anomaly True" in proc.stdout
    found = {f["rule"]: f for f in summary["findings"]}
    assert "anomaly-detection-on" in found, summary["findings"]
    line = _line(script, "torch.autograd.set_detect_anomaly(True)")
    assert f"anomaly_train.py:{line}" in found["anomaly-detection-on"]["evidence"]
    for rule in ("sync-heavy", "sync-heavy-mac"):
        if rule in found:
            assert "anomaly detection checking every backward op" in found[rule]["fix"], found[rule]["fix"]
