"""``mpsprof doctor``: is this machine set up to train on its accelerator, and if not, why.

Every check reads only the environment dict of :func:`mpsprofiler.environment.collect_environment`
(environment variables included, under ``pytorch_env``), so the macOS, Rosetta and Intel-Mac
cases are tested on Linux with fake dicts. Nothing here initialises CUDA.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from .devices.mps_rules import (
    DEFAULT_HIGH_WATERMARK_UNIFIED,
    DEFAULT_LOW_WATERMARK_DISCRETE,
    DEFAULT_LOW_WATERMARK_UNIFIED,
    HIGH_WATERMARK_UPPER_BOUND,
    STRTOD_NUMBER,
    paired_low,
    strtod,
    validate_watermarks,
)
from .environment import mps_min_macos_for
from .events.payloads import EnvFields
from .units import console_text, plural, text_console

STATUSES = ("ok", "warn", "fail", "info")
_RANK = {"info": 0, "ok": 1, "warn": 2, "fail": 3}
MIN_TORCH = (2, 1)
_GIB = 1024**3


@dataclass
class Check:
    """One verdict: ``fix`` is Markdown (inline code in backticks), empty when nothing to do."""

    id: str
    title: str
    status: str
    detail: str
    fix: str = ""


def version_tuple(text: str | None) -> tuple[int, ...] | None:
    """(2, 9) from "2.9.0+cpu" or "2.10.0.dev20250101"; (14, 5) from "14.5"."""
    if not text:
        return None
    match = re.match(r"\s*(\d+)(?:\.(\d+))?", text)
    if not match:
        return None
    return (int(match.group(1)), int(match.group(2) or 0))


def mps_min_macos(torch_version: str | None) -> tuple[int, int] | None:
    """The oldest macOS a torch release runs MPS on (PyTorch's release notes)."""
    version = version_tuple(torch_version)
    return None if version is None else mps_min_macos_for(version)


def _fmt_version(version: tuple[int, ...]) -> str:
    """ "14" for (14, 0), "12.3" for (12, 3): how Apple names its releases."""
    return str(version[0]) if version[1:] in ((), (0,)) else ".".join(str(p) for p in version)


def _on_mac(env: EnvFields) -> bool:
    return env.get("platform") == "darwin"


def _vars(env: EnvFields) -> dict[str, str]:
    return env.get("pytorch_env") or {}


# --- the checks -------------------------------------------------------------------------


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
    elif _on_mac(env):
        build = "MPS build" if env.get("mps_built") else "build without MPS"
    else:
        build = "CPU-only build"
    detail = f"torch {version} ({build})."
    if (version_tuple(version) or MIN_TORCH) < MIN_TORCH:
        return Check("torch", "PyTorch", "warn", detail + f" mpsprof needs torch {_fmt_version(MIN_TORCH)}+.",
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


def _torch_pin(dist: str) -> str | None:
    """The ``torch==X`` a distribution requires, from its metadata."""
    from importlib import metadata

    try:
        requires = metadata.requires(dist) or []
    except metadata.PackageNotFoundError:
        return None
    for req in requires:
        m = re.match(r"\s*torch\s*==\s*([\w.+]+)", req)
        if m and "extra ==" not in req:
            return m.group(1)
    return None


def _mps(status: str, detail: str, fix: str = "") -> Check:
    return Check("mps", "MPS (Apple GPU)", status, detail, fix)


def check_mps(env: EnvFields) -> Check:
    """MPS built and available, and the first reason it is not
    (``torch.backends.mps.is_built`` / ``is_available``)."""
    if not _on_mac(env):
        return _mps("info", f"Unavailable: not macOS (platform {env.get('platform')!r}). MPS is the "
                    "Apple-GPU backend; on this machine mpsprof profiles CUDA or the CPU.")
    if env.get("rosetta"):
        return _mps("fail", "Unavailable: this Python is x86_64 running under Rosetta on Apple silicon. "
                    "MPS needs a native arm64 Python, and x86_64 macOS torch wheels stop at 2.2.2.",
                    "Install an arm64 Python (python.org universal2 installer, Homebrew in "
                    "`/opt/homebrew`, or Miniforge arm64), recreate the virtual environment and "
                    "reinstall torch. `python -c \"import platform; print(platform.machine())\"` "
                    "must print `arm64`.")
    if not env.get("apple_silicon"):
        if env.get("mps_available"):
            return _mps("info", "Available on an Intel Mac (AMD GPU): expect modest gains and frequent "
                        "CPU fallbacks; compare with `mpsprof bench`.")
        return _mps("info", "Unavailable: Intel Mac. Train on the CPU and set expectations accordingly: "
                    "keep models small, use as many threads as physical cores; x86_64 torch wheels "
                    "stop at 2.2.2.")
    if env.get("mps_built") is False:
        return _mps("fail", f"This torch build ({env.get('torch')}) has no MPS support.",
                    "Install the official wheel: `python -m pip install --upgrade torch` (old or "
                    "third-party builds often lack MPS).")
    too_old = _macos_too_old(env)
    if too_old is not None:
        return too_old
    if not env.get("mps_available"):
        return _mps("fail", "Built but unavailable: torch has MPS yet sees no Metal device. Usual cause: "
                    "a sandbox, virtual machine, container or CI runner without GPU access.",
                    "Run on the Mac itself, from a plain Terminal: "
                    "`python -c \"import torch; print(torch.backends.mps.is_available())\"`.")
    return _mps("ok", _mps_ok_detail(env))


def _macos_too_old(env: EnvFields) -> Check | None:
    need, have = mps_min_macos(env.get("torch")), version_tuple(env.get("macos_version"))
    if need is None or have is None or have >= need:
        return None
    if have >= (12, 3):
        older = "2.9" if have >= (13, 0) else "2.5"
        alternative = f'or keep this macOS with `python -m pip install "torch<{older}"`.'
    else:
        alternative = "MPS needs macOS 12.3 at the very least."
    return _mps("fail", f"torch {env.get('torch')} needs macOS {_fmt_version(need)} or newer for MPS; "
                f"this Mac runs macOS {env.get('macos_version')}.",
                f"Update macOS to {_fmt_version(need)}+, {alternative}")


def _mps_ok_detail(env: EnvFields) -> str:
    detail = f"Available: torch {env.get('torch')} on macOS {env.get('macos_version')}"
    detail += f", {env['chip']}." if env.get("chip") else "."
    have = version_tuple(env.get("macos_version")) or (99, 0)
    if have < (14, 0):
        detail += " bfloat16 and complex tensors need macOS 14."
    if have < (13, 3):
        detail += " Before macOS 13.3 some int64 ops are downcast."
    return detail


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
        visible = _vars(env).get("CUDA_VISIBLE_DEVICES")
        detail = f"torch is built for CUDA {env['torch_cuda']} but sees no GPU."
        if visible is not None and visible.strip() in ("", "-1"):
            detail += f" CUDA_VISIBLE_DEVICES={visible!r} hides every GPU."
        return Check("cuda", "CUDA", "warn", detail, "Check `nvidia-smi`: the driver must support CUDA "
                     f"{env['torch_cuda']}; unset `CUDA_VISIBLE_DEVICES` if it hides the GPUs.")
    if _on_mac(env):
        return Check("cuda", "CUDA", "info", "Not applicable: PyTorch has no CUDA on macOS.")
    return Check("cuda", "CUDA", "info", f"No CUDA: torch {env.get('torch')} is a CPU-only build. If "
                 "this machine has an NVIDIA GPU, install a CUDA wheel (pytorch.org/get-started).")


FALLBACK = "PYTORCH_ENABLE_MPS_FALLBACK"
HIGH = "PYTORCH_MPS_HIGH_WATERMARK_RATIO"
LOW = "PYTORCH_MPS_LOW_WATERMARK_RATIO"


def check_mps_fallback(env: EnvFields) -> Check:
    """The fallback switch is parsed with ``std::stoi`` once, while torch loads."""
    title, raw = "MPS CPU fallback", _vars(env).get(FALLBACK)
    if not _on_mac(env):
        state = "is not set" if raw is None else f"={raw!r} has no effect"
        return Check("mps_fallback", title, "info", f"{FALLBACK} {state} (only the MPS backend reads it).")
    if raw is None:
        return Check("mps_fallback", title, "info", f"{FALLBACK} is not set: an op without an MPS "
                     "kernel raises NotImplementedError naming the op.")
    when = (" It is read once, when torch loads: set it in the shell, not with `os.environ` "
            "after `import torch`.")
    value, fix = raw.strip(), f"Use `{FALLBACK}=1` (or `0`), exported before Python starts."
    if value == "1":
        return Check("mps_fallback", title, "info", f"{FALLBACK}=1: ops without an MPS kernel run on "
                     "the CPU. Only the first is warned about (TORCH_WARN_ONCE), and many fallbacks can "
                     "make training slower than pure CPU; `mpsprof run` counts them." + when)
    if value == "0":
        return Check("mps_fallback", title, "info",
                     f"{FALLBACK}=0: unsupported ops raise NotImplementedError." + when)
    if re.match(r"[+-]?\d", value):
        return Check("mps_fallback", title, "warn", f"{FALLBACK}={raw!r} is not '0' or '1'; torch "
                     "treats any non-zero integer as on." + when, fix)
    return Check("mps_fallback", title, "fail", f"{FALLBACK}={raw!r} is not valid (only '0' and '1' "
                 "are): depending on the version, torch aborts at `import torch` (std::stoi fails) "
                 "or ignores it." + when, fix)


Finding = tuple[str, str, str]
"""(status, detail, fix) of one watermark problem."""


def _ratio(name: str, raw: str, found: list[Finding]) -> float:
    """The value the allocator's ``strtod`` reads (0.0 when there is no number at all)."""
    value = strtod(raw)
    try:
        float(raw)
    except ValueError:
        no_number = STRTOD_NUMBER.match(raw) is None
        read_as = "0.0, i.e. no limit at all" if value == 0.0 and name == HIGH else f"{value:g}"
        found.append(("fail" if no_number else "warn",
                      f"{name}={raw!r} is not a number; torch reads it as {read_as}.",
                      f"Set `{name}` to a plain number."))
    return value


def check_mps_watermarks(env: EnvFields) -> Check:
    """The MPS allocator's limits: a bad pair makes the first MPS allocation raise."""
    title, variables = "MPS memory watermarks", _vars(env)
    high_raw, low_raw = variables.get(HIGH), variables.get(LOW)
    if not _on_mac(env):
        state = "Not set" if high_raw is None and low_raw is None else "Set, but no effect here"
        return Check("mps_watermark", title, "info", f"{state} (only the MPS allocator reads them).")
    found: list[Finding] = []
    high = DEFAULT_HIGH_WATERMARK_UNIFIED if high_raw is None else _ratio(HIGH, high_raw, found)
    unified = env.get("apple_silicon")
    default_low = DEFAULT_LOW_WATERMARK_UNIFIED if unified else DEFAULT_LOW_WATERMARK_DISCRETE
    low = default_low if low_raw is None else _ratio(LOW, low_raw, found)
    _judge_ratios(high, low, high_raw, low_raw, found)
    when = (" Both are read once, when the MPS allocator starts: changing them after the first MPS "
            "tensor does nothing.")
    if not found:
        default = " (default)" if high_raw is None else ""
        return Check("mps_watermark", title, "ok",
                     f"High {high:g}{default} x the GPU's recommended working set, low {low:g}." + when)
    status = max((s for s, _, _ in found), key=_RANK.__getitem__)
    return Check("mps_watermark", title, status, " ".join(d for _, d, _ in found) + when,
                 " ".join(f for _, _, f in found))


def _judge_ratios(high: float, low: float, high_raw: str | None, low_raw: str | None,
                  found: list[Finding]) -> None:
    """torch's own checks (:func:`~mpsprofiler.devices.mps_rules.validate_watermarks`), then 0.0."""
    error = validate_watermarks(high, low)
    example = f"{paired_low(high):g}"
    if error is not None and error.startswith("invalid high"):
        found.append(("fail", f"{HIGH}={high_raw} is outside [0, {HIGH_WATERMARK_UPPER_BOUND:.1f}]: the "
                      f"first MPS allocation fails with `{error}`.", f"Set `{HIGH}` between 0 and "
                      f"{HIGH_WATERMARK_UPPER_BOUND:.1f} (default {DEFAULT_HIGH_WATERMARK_UNIFIED:g}), with "
                      f"`{LOW}` at or below it."))
        return
    limit = HIGH_WATERMARK_UPPER_BOUND if high == 0.0 else high
    if error is not None and low_raw is None:
        found.append(("fail", f"The high ratio {high_raw} is below the default low ratio {low:g}: the "
                      f"first MPS allocation fails with `{error}`.",
                      f"Set `{LOW}` as well, at or below the high one (e.g. `{example}`), in the "
                      "environment before the process starts."))
    elif error is not None:
        found.append(("fail", f"{LOW}={low_raw} must be between 0 and the high ratio ({limit:g}): "
                      f"torch fails with `{error}`.",
                      f"Lower `{LOW}` to at most {limit:g} (e.g. `{example}`)."))
    if high == 0.0:
        found.append(("warn", f"{HIGH}=0.0 removes the memory limit: instead of a clean 'MPS backend "
                      "out of memory' error the Mac swaps and can freeze.", f"Prefer a cap (e.g. `{HIGH}=1.0 "
                      f"{LOW}=0.8`), smaller batches and `torch.mps.empty_cache()`; keep 0.0 only while "
                      "watching memory."))


def check_hardware(env: EnvFields) -> Check:
    cores = f"{env.get('cores_logical') or '?'} logical / {env.get('cores_physical') or '?'} physical cores"
    if env.get("cores_performance"):
        cores += f" ({env['cores_performance']} performance)"
    memory = env.get("memory_total")
    size = f"{memory / _GIB:.1f} GiB memory" if memory else "memory unknown"
    detail = f"{env.get('chip') or 'unknown chip'}; {cores}; {size}."
    if not env.get("apple_silicon"):
        return Check("hardware", "Chip and memory", "info", detail)
    detail += " Unified memory: the GPU shares it with every app on the Mac."
    if memory and memory <= 8.5 * _GIB:
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
    from .diagnosis.analyzers.threads import judge_threads

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
            detail += f" Other programs use {others:.1f} of {cores} cores{named}: about {j.cores_free:.1f} are free."
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


CHECKS: tuple[Callable[[EnvFields], Check], ...] = (
    check_python, check_torch, check_torchvision, check_numpy, check_mps, check_cuda,
    check_mps_fallback, check_mps_watermarks, check_hardware, check_threads,
)


def run_checks(env: EnvFields | None = None) -> list[Check]:
    """Every check over ``env`` (collected here when None); a crashing check reports itself."""
    if env is None:
        env = collect_for_doctor()
    results = []
    for check in CHECKS:
        try:
            results.append(check(env))
        except Exception as exc:  # a doctor that crashes helps nobody
            name = check.__name__.removeprefix("check_")
            results.append(Check(name, name, "warn", f"Check failed: {type(exc).__name__}: {exc}"))
    return results


def collect_for_doctor() -> EnvFields:
    """The environment, importing torch safely first.

    A non-numeric ``PYTORCH_ENABLE_MPS_FALLBACK`` can abort ``import torch`` on a Mac (torch
    parses it with ``std::stoi`` while loading), so it is hidden during the import and still
    reported: that is exactly the case the user runs doctor for.
    """
    from .environment import collect_environment, pytorch_env

    raw = os.environ.get(FALLBACK)
    hide = "torch" not in sys.modules and raw is not None and not re.match(r"\s*[+-]?\d", raw)
    if hide:
        del os.environ[FALLBACK]
    try:
        env = collect_environment(probe_gpu_name=True)
    finally:
        if hide:
            os.environ[FALLBACK] = raw  # type: ignore[assignment]
    env["pytorch_env"] = pytorch_env()
    env["numpy"] = _installed_version("numpy")
    extra: dict[str, Any] = env  # type: ignore[assignment]  # doctor-only keys beside the EnvFields
    extra["torchvision"] = _installed_version("torchvision")
    extra["torchvision_torch"] = _torch_pin("torchvision")
    env["nvidia_driver"] = nvidia_driver_present()
    from .launcher.others import measure_once

    extra.update(measure_once() or {})  # other programs' CPU now: the thread check counts the free cores
    return env


def nvidia_driver_present() -> bool | None:
    """On Linux, whether an NVIDIA driver is loaded (its /proc entry or a device node);
    None elsewhere (macOS has none; Windows is not looked at)."""
    if not sys.platform.startswith("linux"):
        return None
    import glob

    return os.path.exists("/proc/driver/nvidia/version") or bool(glob.glob("/dev/nvidia[0-9]*"))


def _installed_version(dist: str) -> str | None:
    """A distribution's version from its metadata, without importing it."""
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


# --- output -----------------------------------------------------------------------------

_STYLE = {"ok": "bold green", "warn": "bold yellow", "fail": "bold red", "info": "bold blue"}


def summary(checks: list[Check]) -> dict[str, int]:
    return {status: sum(1 for c in checks if c.status == status) for status in STATUSES}


def to_json(checks: list[Check], env: EnvFields) -> dict[str, Any]:
    """The machine-readable report (``mpsprof doctor --json``)."""
    worst = max((c.status for c in checks), key=_RANK.__getitem__, default="ok")
    return {
        "schema": "mpsprof.doctor/1",
        "status": "ok" if worst == "info" else worst,
        "summary": summary(checks),
        "checks": [asdict(c) for c in checks],
        "environment": env,
    }


def _markdown_text(text: str, color: bool) -> Any:
    """Inline code in a terminal gets a colour instead of backticks; a pipe keeps the Markdown."""
    from rich.text import Text

    if not color:
        return Text(text)
    out = Text()
    for i, part in enumerate(text.split("`")):
        out.append(part, style="cyan" if i % 2 else "")
    return out


def render_text(checks: list[Check], env: EnvFields | None = None, *,
                color: bool | None = None, width: int | None = None) -> str:
    """A table for people: coloured on a terminal, plain (Markdown fixes intact) in a pipe."""
    from rich.table import Table
    from rich.text import Text

    color = sys.stdout.isatty() if color is None else color
    if width is None:
        width = min(shutil.get_terminal_size((100, 24)).columns, 110) if color else 100
    console = text_console(color, width)
    if env:
        head = [env.get("os"), f"Python {env.get('python')}", f"torch {env.get('torch') or 'missing'}"]
        console.print(Text("mpsprof doctor: " + " | ".join(str(h) for h in head if h), style="bold"))
        console.print()
    table = Table(box=None, show_header=False, pad_edge=False, padding=(0, 2, 1, 0))
    table.add_column("status", no_wrap=True)
    table.add_column("check", no_wrap=True, style="bold")
    table.add_column("detail", overflow="fold")
    for check in checks:
        body = _markdown_text(check.detail, color)
        if check.fix:
            body.append("\nfix: ", style="bold")
            body.append_text(_markdown_text(check.fix, color))
        table.add_row(Text(check.status.upper(), style=_STYLE.get(check.status, "")), check.title, body)
    console.print(table)
    console.print()
    counts = summary(checks)
    console.print(", ".join(f"{n} {s}" for s, n in counts.items()))
    return console_text(console).rstrip() + "\n"


def add_doctor_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the checks and environment as JSON")


def main_doctor(args: argparse.Namespace) -> int:
    """Print the checks; the exit code is 0 because doctor reports, it does not gate."""
    env = collect_for_doctor()
    checks = run_checks(env)
    if getattr(args, "json", False):
        sys.stdout.write(json.dumps(to_json(checks, env), indent=2) + "\n")
    else:
        sys.stdout.write(render_text(checks, env))
    return 0
