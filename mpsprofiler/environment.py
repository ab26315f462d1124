"""Facts about the machine, the Python and the torch build, for the probe and ``doctor``.

Everything here is cheap (no CUDA context is created, no slow CPU probing unless the quick
sources fail) and never raises: a fact that cannot be read is ``None``, because a broken
``sysctl`` must not keep the profiler from running the user's training.
"""

from __future__ import annotations

import functools
import os
import platform
import re
import subprocess
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from .events.payloads import EnvFields

T = TypeVar("T")

ENV_NAMES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES")
"""Variables besides ``PYTORCH_*`` that change how torch trains."""

_SUBPROCESS_TIMEOUT_S = 0.5


def _safe(fn: Callable[[], T]) -> T | None:
    """Run ``fn``; any failure means the fact is unknown."""
    try:
        return fn()
    except Exception:
        return None


def _run(args: list[str]) -> str | None:
    """Stripped stdout of a short command, or None when it fails or is not there."""
    try:
        done = subprocess.run(
            args,
            capture_output=True,
            text=True,
            timeout=_SUBPROCESS_TIMEOUT_S,
            check=False,
        )
    except Exception:
        return None
    if done.returncode != 0:
        return None
    out = done.stdout.strip()
    return out or None


@functools.cache
def sysctl(name: str) -> str | None:
    """``sysctl -n NAME`` on macOS (None elsewhere); cached since these never change."""
    if sys.platform != "darwin":
        return None
    return _run(["/usr/sbin/sysctl", "-n", name]) or _run(["sysctl", "-n", name])


def _sysctl_int(name: str) -> int | None:
    value = sysctl(name)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


@functools.lru_cache(maxsize=1)
def cpu_brand() -> str | None:
    """The full CPU/chip name ("Apple M2 Pro", "Intel(R) Xeon(R) ...").

    The OS's own answer comes first because py-cpuinfo spawns a process and takes about a
    second; it is only the last resort.
    """
    brand: str | None = None
    if sys.platform == "darwin":
        brand = sysctl("machdep.cpu.brand_string")
    elif sys.platform.startswith("linux"):
        brand = _safe(_proc_cpuinfo_brand)
    elif sys.platform == "win32":
        brand = platform.processor() or None
    if not brand:
        brand = _safe(_cpuinfo_brand)
    return brand.strip() if brand else None


def _proc_cpuinfo_brand() -> str | None:
    with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
        text = fh.read(65536)
    for key in ("model name", "Hardware", "Model", "cpu model"):
        match = re.search(rf"^{key}\s*:\s*(.+)$", text, re.MULTILINE)
        if match and match.group(1).strip():
            return match.group(1).strip()
    return None


def _cpuinfo_brand() -> str | None:
    import cpuinfo  # py-cpuinfo: slow, hence last

    info = cpuinfo.get_cpu_info()
    return info.get("brand_raw") or info.get("brand") or None


def chip_name() -> str:
    """The chip's name as device names use it: "M2 Pro" (the "Apple " prefix dropped,
    since callers write "Apple {chip} GPU"), or the full CPU name elsewhere."""
    brand = cpu_brand()
    if not brand:
        return "unknown chip"
    return brand[len("Apple ") :] if brand.startswith("Apple ") else brand


@functools.lru_cache(maxsize=1)
def macos_version() -> str | None:
    """"14.5" on macOS, else None. Pythons built against old SDKs report "10.16"."""
    if sys.platform != "darwin":
        return None
    version = platform.mac_ver()[0] or None
    if version is None or version.startswith("10.16"):
        version = _run(["/usr/bin/sw_vers", "-productVersion"]) or version
    return version


def is_apple_silicon() -> bool:
    """True on an M-series Mac, also when this Python runs under Rosetta."""
    if sys.platform != "darwin":
        return False
    return platform.machine() == "arm64" or sysctl("hw.optional.arm64") == "1"


def is_rosetta() -> bool:
    """An x86_64 process translated on Apple silicon (the key is absent on Intel Macs)."""
    return sys.platform == "darwin" and sysctl("sysctl.proc_translated") == "1"


def _os_name() -> str | None:
    if sys.platform == "darwin":
        version = macos_version()
        return f"macOS {version}" if version else "macOS"
    system = platform.system() or sys.platform
    release = platform.release()
    return f"{system} {release}".strip()


def _cores() -> tuple[int | None, int | None]:
    try:
        import psutil

        return psutil.cpu_count(logical=True), psutil.cpu_count(logical=False)
    except Exception:
        return os.cpu_count(), None


def _memory_total() -> int | None:
    import psutil

    return int(psutil.virtual_memory().total)


def mps_min_macos_for(torch_version: tuple[int, ...]) -> tuple[int, int]:
    """The oldest macOS a torch release, as (major, minor), runs MPS on. ``doctor`` and the
    environment analyzer both ask here.

    ``MPSDevice::MPSDevice`` (aten/src/ATen/mps/MPSDevice.mm) looks for a Metal device only
    where the system's MPSGraph has a method of the oldest macOS that release supports:
    12.3 through 2.4 (``LSTMWithSourceTensor:...``); 13.0 from 2.5
    (``cumulativeSumWithTensor:axis:name:``; pytorch/pytorch#139425: 2.5.1 on 12.7.6 finds no
    MPS device); 14.0 from 2.9 (``HermiteanToRealFFTWithTensor:axes:descriptor:name:``;
    removing macOS 13 was proposed after 2.8 had branched, pytorch/pytorch#159275, and
    "PyTorch needs MacOS-14 or newer to use MPS", pytorch/pytorch#163515). The table with
    these sources is :data:`mpsprofiler.devices.mps_rules.BEHAVIOUR` (this module is a leaf of
    the layers and may not import it; tests/e2e/test_mps_rules.py checks that both agree)."""
    if torch_version <= (2, 4):
        return (12, 3)
    if torch_version <= (2, 8):
        return (13, 0)
    return (14, 0)


def pytorch_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """Every set ``PYTORCH_*`` variable plus the thread and GPU-visibility ones."""
    env = os.environ if environ is None else environ
    return {k: v for k, v in sorted(env.items()) if k.startswith("PYTORCH_") or k in ENV_NAMES}


def _torch_facts(probe_gpu_name: bool) -> EnvFields:
    facts: EnvFields = {
        "torch": None,
        "torch_cuda": None,
        "mps_built": None,
        "mps_available": None,
        "cuda_available": None,
        "cuda_device_count": None,
        "cuda_device_name": None,
        "torch_threads": None,
    }
    try:
        import torch
    except Exception:
        return facts
    facts["torch"] = _safe(lambda: str(torch.__version__))
    facts["torch_cuda"] = _safe(lambda: torch.version.cuda)
    mps = getattr(torch.backends, "mps", None)
    facts["mps_built"] = _safe(lambda: bool(mps.is_built())) if mps else False
    facts["mps_available"] = _safe(lambda: bool(mps.is_available())) if mps else False
    facts["cuda_available"] = _safe(lambda: bool(torch.cuda.is_available()))
    if facts["cuda_available"]:
        facts["cuda_device_count"] = _safe(lambda: int(torch.cuda.device_count()))
        facts["cuda_device_name"] = _cuda_name(torch, probe_gpu_name)
    else:
        facts["cuda_device_count"] = 0 if facts["cuda_available"] is False else None
    facts["torch_threads"] = _safe(lambda: int(torch.get_num_threads()))
    return facts


def _cuda_name(torch: Any, probe_gpu_name: bool) -> str | None:
    """The GPU's name without creating a CUDA context in this process.

    Inside the training process (the probe) only an already initialised CUDA is asked;
    ``doctor`` may ask ``nvidia-smi``, which runs in its own process.
    """
    if _safe(torch.cuda.is_initialized):
        return _safe(lambda: str(torch.cuda.get_device_name(torch.cuda.current_device())))
    if not probe_gpu_name:
        return None
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip() or "0"
    out = _run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", visible])
    return out.splitlines()[0].strip() if out else None


def collect_environment(*, probe_gpu_name: bool = False) -> EnvFields:
    """JSON-serialisable environment facts; unknown ones are None.

    ``probe_gpu_name``: let ``nvidia-smi`` name an uninitialised CUDA GPU (for ``doctor``;
    the probe leaves it off so the training's process is not slowed or disturbed).
    """
    logical, physical = _cores()
    env: EnvFields = {
        "python": platform.python_version(),
        "python_executable": sys.executable or None,
        "platform": sys.platform,
        "os": _safe(_os_name),
        "macos_version": _safe(macos_version),
        "machine": _safe(platform.machine) or None,
        "chip": _safe(cpu_brand),
        "apple_silicon": bool(_safe(is_apple_silicon)),
        "rosetta": bool(_safe(is_rosetta)),
        "cores_logical": logical,
        "cores_physical": physical,
        "cores_performance": _safe(lambda: _sysctl_int("hw.perflevel0.physicalcpu")),
        "memory_total": _safe(_memory_total),
    }
    env.update(_torch_facts(probe_gpu_name))
    env["omp_num_threads"] = os.environ.get("OMP_NUM_THREADS")
    env["pytorch_env"] = _safe(pytorch_env) or {}
    return env
