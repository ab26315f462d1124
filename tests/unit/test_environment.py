"""Environment facts on the machine the tests run on (Linux, CPU-only torch)."""

from __future__ import annotations

import json
import sys
import time

import pytest
import torch

from mpsprofiler import environment
from mpsprofiler.environment import chip_name, collect_environment, pytorch_env

KEYS = {
    "python", "python_executable", "platform", "os", "macos_version", "machine", "chip",
    "apple_silicon", "rosetta", "cores_logical", "cores_physical", "cores_performance",
    "memory_total", "torch", "torch_cuda", "mps_built", "mps_available", "cuda_available",
    "cuda_device_count", "cuda_device_name", "torch_threads", "omp_num_threads", "pytorch_env",
}


def test_keys_are_exactly_the_documented_ones() -> None:
    assert set(collect_environment()) == KEYS


def test_facts_are_sane_and_serialisable() -> None:
    env = collect_environment()
    json.loads(json.dumps(env))
    assert env["python"] == ".".join(map(str, sys.version_info[:3]))
    assert env["platform"] == sys.platform
    assert isinstance(env["cores_logical"], int) and env["cores_logical"] >= 1
    assert env["cores_physical"] is None or 1 <= env["cores_physical"] <= env["cores_logical"]
    assert isinstance(env["memory_total"], int) and env["memory_total"] > 0
    assert env["torch"] == torch.__version__
    assert env["torch_threads"] == torch.get_num_threads()
    assert isinstance(env["pytorch_env"], dict)


@pytest.mark.skipif(sys.platform == "darwin", reason="Linux facts")
def test_linux_has_no_mac_facts() -> None:
    env = collect_environment()
    assert env["mps_available"] is False
    assert env["apple_silicon"] is False and env["rosetta"] is False
    assert env["macos_version"] is None and env["cores_performance"] is None
    assert env["os"].startswith("Linux")
    assert env["chip"]  # /proc/cpuinfo names the CPU


def test_cuda_is_not_initialised_by_collecting() -> None:
    collect_environment()
    assert not torch.cuda.is_initialized()


def test_is_cheap_once_torch_is_imported() -> None:
    collect_environment()  # fills the caches (cpu brand, sysctl)
    start = time.perf_counter()
    collect_environment()
    assert time.perf_counter() - start < 0.3


def test_pytorch_env_picks_the_relevant_variables() -> None:
    environ = {
        "PYTORCH_ENABLE_MPS_FALLBACK": "1",
        "PYTORCH_MPS_HIGH_WATERMARK_RATIO": "0.0",
        "OMP_NUM_THREADS": "4",
        "CUDA_VISIBLE_DEVICES": "0",
        "HOME": "/root",
        "MKL_NUM_THREADS": "2",
    }
    assert pytorch_env(environ) == {k: v for k, v in environ.items() if k != "HOME"}


def test_env_vars_are_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTORCH_MPS_LOW_WATERMARK_RATIO", "0.5")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    env = collect_environment()
    assert env["pytorch_env"]["PYTORCH_MPS_LOW_WATERMARK_RATIO"] == "0.5"
    assert env["omp_num_threads"] == "1"


def test_chip_name_drops_the_apple_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    assert chip_name()  # never empty
    monkeypatch.setattr(environment, "cpu_brand", lambda: "Apple M2 Pro")
    assert chip_name() == "M2 Pro"
    monkeypatch.setattr(environment, "cpu_brand", lambda: None)
    assert chip_name() == "unknown chip"


def test_a_failing_command_is_an_unknown_fact() -> None:
    assert environment._run(["/nonexistent/sysctl", "-n", "hw.ncpu"]) is None
    assert environment._run(["false"]) is None
    if sys.platform != "darwin":
        assert environment.sysctl("machdep.cpu.brand_string") is None
