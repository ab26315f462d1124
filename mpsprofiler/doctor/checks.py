"""The doctor's checks of the software and the machine: Python, torch, NumPy, torchvision,
CUDA, the chip and memory, and CPU threads.

Each check reads only the environment dict (see :mod:`mpsprofiler.doctor`) and returns a
:class:`~.check.Check`; the Apple GPU's checks are :mod:`.mps`.
"""

from __future__ import annotations

import sys
from typing import Any

from ..events.payloads import EnvFields
from ..units import plural
from .check import GIB, MIN_TORCH, Check, env_vars, fmt_version, on_mac, version_tuple


def check_python(env: EnvFields) -> Check:
    detail = f"Python {env.get('python')} ({env.get('machine') or 'unknown arch'})"
    if env.get("python_executable"):
        detail += f" at {env['python_executable']}"
    return Check("python", "Python", "info", detail + ".")


def check_torch(env: EnvFields) -> Check:
    version = env.get("torch")
    if not version:
        return Check("torch", "PyTorch", "fail", "PyTorch cannot be imported by this Python "
                     f"({env.get('python_executable')}).", "Install it into this environment: "
                     "`python -m pip install torch` (the Apple-silicon wheels on PyPI include MPS).")
    if env.get("torch_cuda"):
        build = f"CUDA {env['torch_cuda']} build"
    elif on_mac(env):
        build = "MPS build" if env.get("mps_built") else "build without MPS"
    else:
        build = "CPU-only build"
    detail = f"torch {version} ({build})."
    if (version_tuple(version) or MIN_TORCH) < MIN_TORCH:
        return Check("torch", "PyTorch", "warn", detail + f" mpsprof needs torch {fmt_version(MIN_TORCH)}+.",
                     "Upgrade: `python -m pip install --upgrade torch`.")
    return Check("torch", "PyTorch", "ok", detail)


def check_numpy(env: EnvFields) -> Check:
    """torch works without NumPy but warns "Failed to initialize NumPy" at import and cannot
    exchange arrays (``torch.from_numpy``, ``Tensor.numpy()``, DataLoader collation of
    NumPy samples); the CPU wheels do not pull it in."""
    if "numpy" not in env:
        return Check("numpy", "NumPy", "info", "Not checked.")
    version = env.get("numpy")
    if not version:
        return Check("numpy", "NumPy", "warn", "NumPy is not installed: torch prints \"Failed to "
                     "initialize NumPy\" at import, and `torch.from_numpy`, `Tensor.numpy()` and "
                     "NumPy samples in a DataLoader fail.", "`python -m pip install numpy`.")
    return Check("numpy", "NumPy", "ok", f"numpy {version}.")


def check_torchvision(env: EnvFields) -> Check:
    """torchvision is built for one torch release and one build (its wheel pins
    ``torch==X``; the CUDA and CPU builds differ by their ``+cpu``/``+cuXXX`` tag, and
    PyPI's Linux wheels without a tag are CUDA builds). A mismatch fails at
    ``import torchvision`` (its C++ ops do not load), and with it every library that
    imports it: torchmetrics, so ``import lightning``. Read from the metadata only."""
    extra: dict[str, Any] = dict(env)
    version, pinned, torch_version = extra.get("torchvision"), extra.get("torchvision_torch"), env.get("torch")
    if not version or not torch_version:
        return Check("torchvision", "torchvision", "info", "Not installed." if not version else "Not checked.")
    detail = f"torchvision {version}"
    fix = ("Install the torchvision built for this torch from the same index, e.g. "
           "`python -m pip install torchvision --index-url https://download.pytorch.org/whl/cpu` "
           "for a CPU torch (see https://pytorch.org/get-started/locally/).")
    base = str(torch_version).split("+")[0]
    if pinned and str(pinned).split("+")[0] != base:
        return Check("torchvision", "torchvision", "fail",
                     f"{detail} is built for torch {pinned}, not the installed {torch_version}: "
                     "`import torchvision` fails (and `import lightning` with it).", fix)
    tag, vision_tag = _local_tag(str(torch_version)), _local_tag(str(version))
    if sys.platform.startswith("linux") and tag == "cpu" and vision_tag != "cpu":
        build = f"a +{vision_tag} build" if vision_tag else "PyPI's build, made for CUDA on Linux"
        return Check("torchvision", "torchvision", "warn",
                     f"{detail} is {build} beside a CPU-only torch {torch_version}: "
                     "`import torchvision` may fail (and `import lightning` with it).", fix)
    return Check("torchvision", "torchvision", "ok", detail + f" (for torch {pinned or base}).")


def _local_tag(version: str) -> str | None:
    return version.split("+", 1)[1] if "+" in version else None


def check_cuda(env: EnvFields) -> Check:
    if env.get("cuda_available"):
        name = env.get("cuda_device_name") or "name unknown until CUDA starts"
        return Check("cuda", "CUDA", "ok",
                     f"CUDA {env.get('torch_cuda')}: {env.get('cuda_device_count')} device(s), {name}.")
    if env.get("torch_cuda") and env.get("nvidia_driver") is False:
        # PyPI's default torch on x86-64 Linux is a CUDA build: it trains on the CPU fine
        return Check("cuda", "CUDA", "info",
                     f"torch is a CUDA {env['torch_cuda']} build and this machine has no NVIDIA driver: "
                     "training runs on the CPU. The CPU-only build is about 5 GB smaller: "
                     "`pip install torch --index-url https://download.pytorch.org/whl/cpu` "
                     "(pytorch.org/get-started).")
    if env.get("torch_cuda"):
        visible = env_vars(env).get("CUDA_VISIBLE_DEVICES")
        detail = f"torch is built for CUDA {env['torch_cuda']} but sees no GPU."
        if visible is not None and visible.strip() in ("", "-1"):
            detail += f" CUDA_VISIBLE_DEVICES={visible!r} hides every GPU."
        return Check("cuda", "CUDA", "warn", detail, "Check `nvidia-smi`: the driver must support CUDA "
                     f"{env['torch_cuda']}; unset `CUDA_VISIBLE_DEVICES` if it hides the GPUs.")
    if on_mac(env):
        return Check("cuda", "CUDA", "info", "Not applicable: PyTorch has no CUDA on macOS.")
    return Check("cuda", "CUDA", "info", f"No CUDA: torch {env.get('torch')} is a CPU-only build. If "
                 "this machine has an NVIDIA GPU, install a CUDA wheel (pytorch.org/get-started).")


def check_hardware(env: EnvFields) -> Check:
    cores = f"{env.get('cores_logical') or '?'} logical / {env.get('cores_physical') or '?'} physical cores"
    if env.get("cores_performance"):
        cores += f" ({env['cores_performance']} performance)"
    memory = env.get("memory_total")
    size = f"{memory / GIB:.1f} GiB memory" if memory else "memory unknown"
    detail = f"{env.get('chip') or 'unknown chip'}; {cores}; {size}."
    if not env.get("apple_silicon"):
        return Check("hardware", "Chip and memory", "info", detail)
    detail += " Unified memory: the GPU shares it with every app on the Mac."
    if memory and memory <= 8.5 * GIB:
        return Check("hardware", "Chip and memory", "warn", detail + " With 8 GB, MPS training runs "
                     "out of memory or swaps early.", "Start at batch size 8 or 16 and double while "
                     "watching memory; close other apps; call `torch.mps.empty_cache()` between phases.")
    return Check("hardware", "Chip and memory", "info", detail)


def check_threads(env: EnvFields) -> Check:
    """Oversubscribed CPU threads make every CPU-side op slower (PyTorch's CPU threading notes).

    The verdict is the thread-oversubscription rule's (rules/thread-oversubscription.yaml):
    the same function, :func:`~mpsprofiler.diagnosis.analyzers.threads.judge_threads`, over
    the same numbers: torch's threads, the physical cores (logical where unknown), the busy
    DataLoader workers (``workers_busy_cores``) and the cores other programs use
    (``others_busy_cores``). ``mpsprof doctor`` runs no training, so no worker is busy (0)
    and other programs are its own short reading; the TUI's Environment panel passes the
    run's measured figures, so it says what the run's finding says."""
    from ..diagnosis.analyzers.threads import judge_threads

    title, omp = "CPU threads", env.get("omp_num_threads")
    threads, logical = env.get("torch_threads"), env.get("cores_logical")
    if omp is not None and not (omp.strip().isdigit() and int(omp) > 0):
        return Check("threads", title, "warn", f"OMP_NUM_THREADS={omp!r} is not a positive integer.",
                     "Set `OMP_NUM_THREADS` to a whole number of threads, at most the core count.")
    if threads is None:
        return Check("threads", title, "info", "torch's thread count is unknown.")
    setting = f" (OMP_NUM_THREADS={omp})" if omp is not None else ""
    physical = _count(env.get("cores_physical"))
    cores = physical or _count(logical)  # the rule's count: physical cores, logical where unknown
    on = (f"{physical} physical / {logical or '?'} logical cores" if physical
          else f"{logical or '?'} logical cores")
    detail = f"torch uses {plural(threads, 'intra-op thread')}{setting} on {on}."
    extra: dict[str, Any] = env  # type: ignore[assignment]  # doctor-only keys beside the EnvFields
    if isinstance(threads, int) and cores:
        others = max(0.0, _number(extra.get("others_busy_cores")) or 0.0)
        workers = max(0.0, _number(extra.get("workers_busy_cores")) or 0.0)
        j = judge_threads(threads, cores, workers, others)
        if workers >= 0.05:
            detail += f" DataLoader workers use {workers:.1f} cores."
        if others >= 0.5:
            top = [t for t in extra.get("others_top") or [] if isinstance(t, dict) and "name" in t][:3]
            named = (" (top: " + ", ".join(f"{t['name']} {float(t.get('cores') or 0) * 100:.0f}%" for t in top)
                     + ")" if top else "")
            # what they leave, as measured (the judgement's cores_free is at least one core: "2.0
            # of 2 cores ... about 1.0 are free"), as the rule's cores_left (analyzers/threads.py)
            detail += f" Other programs use {others:.1f} of {cores} cores{named}: about {max(0.0, cores - others):.1f} are free."
        if j.oversubscribed:
            detail += (f" {j.ratio:.1f} busy threads per free core: oversubscribed, threads wait for each other.")
            if others >= 0.5:
                fix = (f"While they run, `torch.set_num_threads({j.suggested})` (or "
                       f"`OMP_NUM_THREADS={j.suggested}`): fewer threads than cores beat more.")
            else:
                fix = (f"Set `OMP_NUM_THREADS={j.suggested}` or call `torch.set_num_threads({j.suggested})`: "
                       "no more threads than the free cores.")
            return Check("threads", title, "warn", detail, fix)
    perf = env.get("cores_performance")
    if env.get("apple_silicon") and perf and threads > perf:
        return Check("threads", title, "info",
                     detail + f" They include efficiency cores; CPU-heavy steps may wait for them: "
                     f"try `torch.set_num_threads({perf})`.")
    return Check("threads", title, "ok", detail)


def _count(value: Any) -> int | None:
    """A core count: a positive whole number, else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
