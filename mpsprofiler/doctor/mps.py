"""The doctor's checks of the Apple GPU: MPS built and available (and the first reason it is
not), the CPU-fallback switch and the allocator's watermark ratios.

The variables are judged as torch reads them: the fallback switch with ``std::stoi`` once
while torch loads, the watermarks with ``strtod`` and torch's own range checks (modelled in
:mod:`mpsprofiler.devices.mps_rules`), once when the MPS allocator starts.
"""

from __future__ import annotations

import re

from ..devices.mps_rules import (
    DECIMAL,
    DEFAULT_HIGH_WATERMARK_UNIFIED,
    DEFAULT_LOW_WATERMARK_DISCRETE,
    DEFAULT_LOW_WATERMARK_UNIFIED,
    HIGH_WATERMARK_UPPER_BOUND,
    STRTOD_NUMBER,
    behaviour,
    fallback_aborts,
    fallback_enabled,
    holds,
    paired_low,
    stoi,
    strtod,
    torch_below_for_macos,
    upgrade_command,
    validate_watermarks,
)
from ..events.payloads import EnvFields
from .check import RANK, Check, env_vars, fmt_version, mps_min_macos, on_mac, version_tuple


def _mps(status: str, detail: str, fix: str = "") -> Check:
    return Check("mps", "MPS (Apple GPU)", status, detail, fix)


X86_64_LAST_TORCH = "2.2.2"
"""The last torch with macOS x86_64 wheels: PyTorch stopped them after 2.2
(pytorch/pytorch#114602, "[RFC] macOS x86 builds / test deprecation"; the 2.2.0 release
notes say 2.2.x is the last to support macOS x64)."""


def check_mps(env: EnvFields) -> Check:
    """MPS built and available, and the first reason it is not
    (``torch.backends.mps.is_built`` / ``is_available``)."""
    if not on_mac(env):
        return _mps("info", f"Unavailable: not macOS (platform {env.get('platform')!r}). MPS is the "
                    "Apple-GPU backend; on this machine mpsprof profiles CUDA or the CPU.")
    if env.get("rosetta"):
        return _mps("fail", "Unavailable: this Python is x86_64 running under Rosetta on Apple silicon. "
                    f"MPS needs a native arm64 Python, and x86_64 macOS torch wheels stop at {X86_64_LAST_TORCH}.",
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
                    f"stop at {X86_64_LAST_TORCH}.")
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
    mac = (have[0], have[1])  # version_tuple gives (major, minor)
    if torch_below_for_macos(mac) is not None:
        alternative = f"or keep this macOS with `{upgrade_command(mac)}`."
    else:
        alternative = "MPS needs macOS 12.3 at the very least."
    return _mps("fail", f"torch {env.get('torch')} needs macOS {fmt_version(need)} or newer for MPS; "
                f"this Mac runs macOS {env.get('macos_version')}.",
                f"Update macOS to {fmt_version(need)}+, {alternative}")


def _mps_ok_detail(env: EnvFields) -> str:
    """Available, and what this torch and macOS lack (sources: :data:`BEHAVIOUR`).

    bfloat16: none before torch 2.3 (``empty_mps`` in aten/src/ATen/mps/EmptyTensor.cpp
    refused it), from 2.3 on macOS 14 only (pytorch/pytorch#119641); complex tensors need
    macOS 14 (``supportsComplex``, aten/src/ATen/native/mps/OperationUtils.h); before macOS
    13.3 some int64 ops run as int32 (the "downcasting to a smaller data type" warning,
    OperationUtils.h, ReduceOps.mm)."""
    detail = f"Available: torch {env.get('torch')} on macOS {env.get('macos_version')}"
    detail += f", {env['chip']}." if env.get("chip") else "."
    have = version_tuple(env.get("macos_version")) or (99, 0)
    torch_version = (version_tuple(env.get("torch")) or (99, 0))[:2]
    bf16 = holds(behaviour("bfloat16 needs macOS 14"), (torch_version[0], torch_version[1]))
    since = behaviour("bfloat16 needs macOS 14").since or (2, 3)
    if have < (14, 0):
        detail += (" bfloat16 and complex tensors need macOS 14." if bf16 else
                   f" Complex tensors need macOS 14; bfloat16 needs torch {since[0]}.{since[1]}+ and macOS 14.")
    elif not bf16:
        detail += f" bfloat16 on MPS needs torch {since[0]}.{since[1]} or newer."
    if have < (13, 3):
        detail += " Before macOS 13.3 some int64 ops are downcast to int32."
    return detail


FALLBACK = "PYTORCH_ENABLE_MPS_FALLBACK"
HIGH = "PYTORCH_MPS_HIGH_WATERMARK_RATIO"
LOW = "PYTORCH_MPS_LOW_WATERMARK_RATIO"


def check_mps_fallback(env: EnvFields) -> Check:
    """The fallback switch is parsed with ``std::stoi`` once, while torch loads.

    aten/src/ATen/mps/MPSFallback.mm, ``TORCH_LIBRARY_IMPL(_, MPS, m)``: unset or
    ``std::stoi(value) == 0`` registers ``mps_error_fallback`` (NotImplementedError), any
    other integer ``mps_fallback``, which warns with ``TORCH_WARN_ONCE`` (the first op only)."""
    title, raw = "MPS CPU fallback", env_vars(env).get(FALLBACK)
    if not on_mac(env):
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
    if not fallback_aborts(raw):
        state = "on: ops without an MPS kernel run on the CPU" if fallback_enabled(raw) else \
            "off: ops without an MPS kernel raise NotImplementedError"
        return Check("mps_fallback", title, "warn", f"{FALLBACK}={raw!r} is not '0' or '1'; torch reads "
                     f"it with std::stoi as {stoi(raw)}, so the fallback is {state}." + when, fix)
    return Check("mps_fallback", title, "fail", f"{FALLBACK}={raw!r} is not valid (only '0' and '1' "
                 "are): torch reads it with std::stoi when it registers its MPS fallback, at `import torch` "
                 "(aten/src/ATen/mps/MPSFallback.mm), and text that does not begin with a number, or a "
                 "number beyond `int`, makes `import torch` abort." + when, fix)


Finding = tuple[str, str, str]
"""(status, detail, fix) of one watermark problem."""


def _ratio(name: str, raw: str, found: list[Finding]) -> float:
    """The value the allocator's ``strtod`` reads (0.0 when there is no number at all)."""
    value = strtod(raw)
    if re.fullmatch(DECIMAL, raw.strip()) is None:  # not float(): it takes "0_1" as 1.0
        no_number = STRTOD_NUMBER.match(raw) is None
        read_as = "0.0, i.e. no limit at all" if value == 0.0 and name == HIGH else f"{value:g}"
        found.append(("fail" if no_number else "warn",
                      f"{name}={raw!r} is not a number; torch reads it as {read_as}.",
                      f"Set `{name}` to a plain number."))
    return value


def check_mps_watermarks(env: EnvFields) -> Check:
    """The MPS allocator's limits: a bad pair makes the first MPS allocation raise."""
    title, variables = "MPS memory watermarks", env_vars(env)
    high_raw, low_raw = variables.get(HIGH), variables.get(LOW)
    if not on_mac(env):
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
    status = max((s for s, _, _ in found), key=RANK.__getitem__)
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
