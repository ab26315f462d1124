"""A model of the checks torch makes on MPS settings, and of the MPS API by release.

Nobody can run MPS on the machines that test mpsprof, so every MPS setting the product
suggests (a rule's fix, a ``try`` candidate, ``--set``) is checked against this model
instead, and the model cites the torch source each rule comes from. Pure Python, stdlib
only: product code (doctor, settings, analyzers) and tests share it, so there is one place
for torch's numbers.

Sources (pytorch/pytorch):

* ``aten/src/ATen/mps/MPSAllocator.h``: ``default_high_watermark_ratio`` (1.7),
  ``default_high_watermark_upper_bound`` (2.0), ``default_low_watermark_ratio_unified``
  (1.4), ``default_low_watermark_ratio_discrete`` (1.0); ``max_device_size()`` is the
  device's ``recommendedMaxWorkingSetSize``.
* ``aten/src/ATen/mps/MPSAllocator.mm``, ``MPSHeapAllocatorImpl::init_allocator``: both
  variables are read with ``getenv`` and parsed with ``strtod`` when the allocator object is
  constructed (a function-local static, created by the first MPS allocation or memory call);
  ``setHighWatermarkRatio``: ``TORCH_CHECK(0 <= ratio <= 2.0, "invalid high watermark ratio
  ", ratio)``, limit = ratio x max_device_size (0 = unlimited); ``setLowWatermarkRatio``:
  ``TORCH_CHECK(0 <= ratio <= (high == 0 ? 2.0 : high), "invalid low watermark ratio ",
  ratio)``. The high ratio is set first, so an environment that lowers only the high ratio
  below the default low one fails at the first MPS allocation.
* The same defaults, documented: https://pytorch.org/docs/stable/mps_environment_variables.html
  (high 1.7; low 1.4 on unified memory, 1.0 on discrete).
* ``torch.mps`` calls: torch/mps/__init__.py; the docs of torch 2.1 already list
  ``synchronize``, ``empty_cache``, ``set_per_process_memory_fraction``,
  ``current_allocated_memory``, ``driver_allocated_memory`` and ``event.Event``
  (https://docs.pytorch.org/docs/2.1/_sources/mps.rst.txt); ``recommended_max_memory`` first
  appears in those of 2.5 (https://docs.pytorch.org/docs/2.5/_sources/mps.rst.txt).
* The oldest macOS with an MPS device, dtypes by macOS: :data:`BEHAVIOUR` names each source.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

HIGH = "PYTORCH_MPS_HIGH_WATERMARK_RATIO"
LOW = "PYTORCH_MPS_LOW_WATERMARK_RATIO"

DEFAULT_HIGH_WATERMARK = 1.7
"""``default_high_watermark_ratio`` (MPSAllocator.h), the same on unified and discrete memory."""
DEFAULT_HIGH_WATERMARK_UNIFIED = DEFAULT_HIGH_WATERMARK
HIGH_WATERMARK_UPPER_BOUND = 2.0
"""``default_high_watermark_upper_bound`` (MPSAllocator.h): twice the recommended working set."""
DEFAULT_LOW_WATERMARK_UNIFIED = 1.4
"""``default_low_watermark_ratio_unified`` (MPSAllocator.h; the only default in releases that
dropped discrete GPUs)."""
DEFAULT_LOW_WATERMARK_DISCRETE = 1.0
"""``default_low_watermark_ratio_discrete`` (MPSAllocator.h, releases that still support AMD GPUs)."""

LOW_TO_HIGH = 0.8
"""The low ratio mpsprof pairs with a high one it suggests: 0.8 x high. torch's own defaults
keep the soft limit (low: garbage collection and adaptive commit start) at 1.4/1.7 = 0.82 of
the hard one on unified memory; 0.8 keeps that gap, and 0.8 x 1.0 = 0.8 is below the discrete
default too, so the pair is valid on both memory kinds."""


def default_low(unified: bool = True) -> float:
    """The low ratio torch uses when the variable is unset (``init_allocator``)."""
    return DEFAULT_LOW_WATERMARK_UNIFIED if unified else DEFAULT_LOW_WATERMARK_DISCRETE


DECIMAL = r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"
"""A plain decimal number, the text ``--set`` takes for a ratio (read alike by C and Python)."""
STRTOD_NUMBER = re.compile(r"\s*(?:" + DECIMAL + r"|[+-]?(?:inf(?:inity)?|nan))", re.IGNORECASE)
STRTOD_HEX = re.compile(r"\s*[+-]?0x(?:[0-9a-f]+\.?[0-9a-f]*|\.[0-9a-f]+)(?:p[+-]?\d+)?", re.IGNORECASE)


def strtod(raw: str) -> float:
    """What C's ``strtod`` (used by ``init_allocator``) reads: the longest leading number
    (decimal, hexadecimal, inf or nan after white space), else 0.0. Never Python's
    ``float()`` on the whole text: it reads ``0_1`` as 1.0 where ``strtod`` reads 0."""
    match = STRTOD_HEX.match(raw)
    if match:
        text = match.group(0).strip()
        sign = -1.0 if text.startswith("-") else 1.0
        body = text.lstrip("+-")
        if "p" not in body.lower():
            body += "p0"
        return sign * float.fromhex(body)
    match = STRTOD_NUMBER.match(raw)
    return float(match.group(0)) if match else 0.0


def _num(value: float) -> str:
    """A double as torch's ``c10::str`` (an ostream, 6 significant digits) prints it."""
    return f"{value:g}"


def validate_watermarks(high: float | None, low: float | None, unified: bool = True) -> str | None:
    """torch's exact error for this pair (None: accepted); None for a ratio = unset (default).

    Mirrors ``setHighWatermarkRatio`` then ``setLowWatermarkRatio`` in ``init_allocator``
    (MPSAllocator.mm): the message is what ``RuntimeError`` carries at the first MPS allocation.
    """
    h = DEFAULT_HIGH_WATERMARK if high is None else high
    if not 0.0 <= h <= HIGH_WATERMARK_UPPER_BOUND:
        return f"invalid high watermark ratio {_num(h)}"
    l_ = default_low(unified) if low is None else low
    limit = HIGH_WATERMARK_UPPER_BOUND if h == 0.0 else h
    if not 0.0 <= l_ <= limit:
        return f"invalid low watermark ratio {_num(l_)}"
    return None


def validate_env(env: dict[str, str], unified: bool = True) -> str | None:
    """:func:`validate_watermarks` over environment variables as the allocator reads them."""
    return validate_watermarks(*ratios_in_force(env, unified), unified)


def effective_limit(high: float | None, recommended_max: int) -> int | None:
    """``m_max_total_allowed_size`` (``setHighWatermarkRatio``): high x recommended max; None = no limit.

    The allocator compares it with the driver's ``currentAllocatedSize`` (everything Metal
    holds for the process, ``torch.mps.driver_allocated_memory()``), not with tensor memory.
    """
    ratio = DEFAULT_HIGH_WATERMARK if high is None else high
    if ratio == 0.0:
        return None
    return int(ratio * recommended_max)


def ratios_in_force(env: dict[str, str], unified: bool = True) -> tuple[float, float]:
    """(high, low) the allocator runs with for these variables: what ``init_allocator``
    reads with ``strtod``, else its defaults (0.0 high = no limit)."""
    high = strtod(env[HIGH]) if HIGH in env else DEFAULT_HIGH_WATERMARK
    low = strtod(env[LOW]) if LOW in env else default_low(unified)
    return high, low


def limit_text(env: dict[str, str], recommended_max: int | None, fmt: Callable[[int], str]) -> list[tuple[str, str]]:
    """Rows that say how torch computes "max allowed" (the OOM message's third number, the
    panel's limit row):
    ``setHighWatermarkRatio`` sets it to high x ``recommendedMaxWorkingSetSize``; the low
    ratio (``setLowWatermarkRatio``) is the soft limit where the allocator starts to
    collect cached buffers. Memory kind unknown to the recording: unified (every Apple
    silicon Mac)."""
    high, low = ratios_in_force(env)
    rows: list[tuple[str, str]] = []
    if recommended_max:
        limit = effective_limit(high, recommended_max)
        rows.append(("computed as", "no limit (high ratio 0.0)" if limit is None
                     else f"high {_num(high)} x {fmt(recommended_max)} recommended max"))
        low_limit = effective_limit(low, recommended_max) if low > 0 else None
        rows.append(("cache collected from", f"{fmt(low_limit)} (low ratio {_num(low)})" if low_limit
                     else f"never (low ratio {_num(low)})"))
    rows.append(("ratios in force", f"high {_num(high)}{'' if HIGH in env else ' (default)'}, "
                 f"low {_num(low)}{'' if LOW in env else ' (default)'}"))
    return rows


def paired_low(high: float) -> float:
    """The low ratio to set with ``high`` (see :data:`LOW_TO_HIGH`); valid on both memory kinds."""
    if high == 0.0:
        return DEFAULT_LOW_WATERMARK_DISCRETE
    return round(high * LOW_TO_HIGH, 2)


def needs_low(high: float, unified: bool = True) -> bool:
    """True when ``high`` alone would be refused: the default low ratio is above it."""
    return validate_watermarks(high, None, unified) is not None and \
        validate_watermarks(high, paired_low(high), unified) is None


FALLBACK = "PYTORCH_ENABLE_MPS_FALLBACK"
STOI_NUMBER = re.compile(r"[ \t\n\v\f\r]*([+-]?\d+)")
"""What ``std::stoi`` reads (base 10): blanks (``isspace``), a sign, decimal digits; the rest
of the text is ignored (``1.0`` reads as 1, ``0x1`` and ``0.5`` as 0)."""
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
"""``std::stoi`` throws ``std::out_of_range`` outside ``int`` (32 bits on macOS arm64)."""


def stoi(raw: str) -> int | None:
    """The ``int`` C++'s ``std::stoi`` reads from ``raw``; None where it throws
    (``std::invalid_argument``: no number first; ``std::out_of_range``: beyond ``int``)."""
    match = STOI_NUMBER.match(raw)
    if match is None:
        return None
    value = int(match.group(1))
    return value if INT_MIN <= value <= INT_MAX else None


def fallback_aborts(raw: str | None) -> bool:
    """``import torch`` aborts on a Mac with this value of the fallback switch.

    ``aten/src/ATen/mps/MPSFallback.mm`` reads it with ``std::stoi`` when torch registers
    its MPS fallback (``TORCH_LIBRARY_IMPL(_, MPS, m)``), as torch loads; text that does not
    begin with a number (``true``, ``yes``, an empty value) throws ``std::invalid_argument``
    there, a number beyond ``int`` ``std::out_of_range``: either ends the process."""
    return raw is not None and stoi(raw) is None


def fallback_enabled(raw: str | None) -> bool:
    """Whether torch on a Mac runs ops without an MPS kernel on the CPU with this value:
    set and ``std::stoi(value) != 0`` (MPSFallback.mm registers ``mps_fallback`` then, else
    ``mps_error_fallback``, which raises NotImplementedError). ``0.5`` and ``0x1`` read as 0:
    off; a value that aborts ``import torch`` is not on either."""
    value = None if raw is None else stoi(raw)
    return value is not None and value != 0


def watermark_fix(env: dict[str, str], unified: bool = True) -> dict[str, str] | None:
    """The pair to set instead of ratios torch refuses (:func:`validate_env`): the high ratio
    as given (2.0 where it is above torch's bound) with its low ratio; None where accepted."""
    if validate_env(env, unified) is None:
        return None
    high, _ = ratios_in_force(env, unified)
    if not 0.0 <= high <= HIGH_WATERMARK_UPPER_BOUND:
        high = HIGH_WATERMARK_UPPER_BOUND if high > 0 else DEFAULT_HIGH_WATERMARK
    return watermark_pair(high)


def watermark_pair(high: float) -> dict[str, str]:
    """The environment for a suggested cap: always both variables, low <= high."""
    return {HIGH: _num(high), LOW: _num(paired_low(high))}


def command_line(high: float, script: str = "train.py") -> str:
    """``PYTORCH_MPS_HIGH_WATERMARK_RATIO=1 PYTORCH_MPS_LOW_WATERMARK_RATIO=0.8 python train.py``."""
    pair = watermark_pair(high)
    return f"{HIGH}={pair[HIGH]} {LOW}={pair[LOW]} python {script}"


@dataclass(frozen=True)
class ApiFact:
    """One MPS behaviour advice depends on, the torch releases it holds for, and its source."""

    name: str
    since: tuple[int, int] | None
    """First release with it (None: every supported release, 2.1 on)."""
    until: tuple[int, int] | None
    """Last release with it (None: still in the newest checked)."""
    what: str
    source: str
    doc: str = ""
    """Words the installed torch's own docstring or source of ``name`` holds where it has
    ``name`` (tests read them there): what ``what`` says, in torch's words."""


MIN_TORCH = (2, 1)
MAX_CHECKED = (2, 15)

API: tuple[ApiFact, ...] = (
    ApiFact("torch.mps.empty_cache", None, None,
            "releases cached, unoccupied buffers of the MPS allocator",
            "torch/mps/__init__.py empty_cache -> MPSHeapAllocatorImpl::emptyCache",
            doc="Releases all unoccupied cached memory"),
    ApiFact("torch.mps.synchronize", None, None,
            "waits for every kernel queued on the MPS device (MPS runs asynchronously)",
            "torch/mps/__init__.py synchronize -> torch._C._mps_deviceSynchronize",
            doc="Waits for all kernels in all streams"),
    ApiFact("torch.mps.current_allocated_memory", None, None,
            "bytes held by live tensors (not the allocator cache)",
            "torch/mps/__init__.py current_allocated_memory",
            doc="does not include cached allocations"),
    ApiFact("torch.mps.driver_allocated_memory", None, None,
            "everything Metal allocated for the process: allocator heaps, cache and MPS/MPSGraph",
            "torch/mps/__init__.py driver_allocated_memory; MPSAllocator.h getDriverAllocatedMemory",
            doc="allocations from MPS/MPSGraph frameworks"),
    ApiFact("torch.mps.set_per_process_memory_fraction", None, None,
            "sets the high ratio after start: float only (TypeError otherwise), 0..2 (ValueError), "
            "0 = unlimited; it does not re-check the low ratio",
            "torch/mps/__init__.py set_per_process_memory_fraction -> setHighWatermarkRatio",
            doc="Allowed range: 0~2"),
    ApiFact("torch.mps.recommended_max_memory", (2, 5), None,
            "the device's recommendedMaxWorkingSetSize (the base of both watermark limits)",
            "torch/mps/__init__.py recommended_max_memory, pytorch/pytorch#128289 "
            "(merged 2024-06-12, after the 2.4 branch cut)",
            doc="recommendedMaxWorkingSetSize"),
    ApiFact("torch.mps.Event", None, None, "MPS events for timing",
            "torch/mps/event.py Event", doc="enable_timing"),
)
"""The ``torch.mps`` calls mpsprof makes or suggests."""

BEHAVIOUR: tuple[ApiFact, ...] = (
    ApiFact("watermarks read once", None, None,
            "PYTORCH_MPS_HIGH/LOW_WATERMARK_RATIO are read when the allocator is created (first MPS "
            "allocation or memory call); setting them later from Python does nothing: set them in "
            "the environment before the process starts (use set_per_process_memory_fraction after)",
            "aten/src/ATen/mps/MPSAllocator.mm MPSHeapAllocatorImpl::init_allocator, _getAllocImpl"),
    ApiFact("PYTORCH_ENABLE_MPS_FALLBACK read once", None, None,
            "read with getenv when torch registers its MPS fallback, i.e. at import torch",
            "aten/src/ATen/mps/MPSFallback.mm TORCH_LIBRARY_IMPL(_, MPS, m)"),
    ApiFact("pin_memory skipped silently", None, (2, 6),
            "DataLoader pins only when CUDA is available (empty pin_memory_device): no pinning, "
            "no warning on a Mac",
            "torch/utils/data/dataloader.py _BaseDataLoaderIter.__init__"),
    ApiFact("pin_memory disabled with a warning", (2, 7), None,
            "DataLoader turns pinning off on MPS: \"'pin_memory' argument is set as true but not "
            "supported on MPS now, device pinned memory won't be used.\"",
            "torch/utils/data/dataloader.py _BaseDataLoaderIter.__init__, pytorch/pytorch#131858"),
    ApiFact("float64 unsupported", None, None,
            "TypeError: Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't "
            "support float64. Please use float32 instead.",
            "aten/src/ATen/mps/EmptyTensor.cpp MPS_ERROR_DOUBLE_NOT_SUPPORTED (empty_mps, empty_strided_mps)"),
    ApiFact("bfloat16 unsupported", None, (2, 2),
            "TypeError: Trying to convert BFloat16 to the MPS backend but it does not have support "
            "for that dtype.",
            "aten/src/ATen/mps/EmptyTensor.cpp empty_mps"),
    ApiFact("bfloat16 needs macOS 14", (2, 3), None,
            "TypeError: MPS BFloat16 is only supported on MacOS 14 or newer",
            "pytorch/pytorch#119641 (merged 2024-02-10); aten/src/ATen/mps/EmptyTensor.cpp"),
    ApiFact("complex needs macOS 14", None, None,
            "TypeError: MPS complex types are only supported on MacOS 14.0 or newer. Necessary, "
            "not sufficient: earlier code refused complex on MPS on any macOS (empty_mps: "
            "\"Complex types are unsupported on MPS\", pytorch/pytorch#95982, March 2023); the "
            "release that lifted it is not pinned here, so the product says only 'needs macOS 14'",
            "aten/src/ATen/native/mps/OperationUtils.h supportsComplex (MACOS_VER_14_0_PLUS), "
            "OperationUtils.mm getMPSDataType"),
    ApiFact("int64 downcast before macOS 13.3", None, None,
            "some ops (cumsum, min/max and other reductions) run int64 as int32 before macOS 13.3: "
            "\"MPS: no support for int64 for ..., downcasting to a smaller data type (int32/float32). "
            "Native support for int64 has been added in macOS 13.3.\"",
            "aten/src/ATen/native/mps/OperationUtils.h (the int64 downcast TORCH_WARN_ONCE), "
            "operations/ReduceOps.mm, operations/UnaryOps.mm (MACOS_VER_13_3_PLUS)"),
    ApiFact("float16 autocast on MPS", (2, 5), None,
            "torch.autocast(device_type=\"mps\", dtype=torch.float16); earlier releases raise "
            "RuntimeError: User specified an unsupported autocast device_type 'mps'",
            "torch/amp/autocast_mode.py autocast.__init__ (is_autocast_available); "
            "pytorch/pytorch#99272 (merged 2024-09, first in the v2.5.0 release)"),
    ApiFact("bfloat16 autocast on MPS", (2, 6), None,
            "torch.autocast(device_type=\"mps\", dtype=torch.bfloat16), on macOS 14 or newer; 2.5 "
            "takes float16 only: for bfloat16 it warns \"In MPS autocast, but the target dtype is not "
            "supported. Disabling autocast.\" and runs in float32 (pytorch/pytorch#139192)",
            "torch/amp/autocast_mode.py autocast.__init__; pytorch/pytorch#139390 (merged 2024-11, "
            "after the 2.5 release)"),
    ApiFact("torch.compile on MPS", (2, 8), None,
            "the default backend (inductor) generates Metal kernels for MPS (MPSInductor, macOS 14+); "
            "earlier releases fail at the compiled model's first call with BackendCompilerFailed "
            "(2.3: \"AssertionError: Device mps not supported\", pytorch/pytorch#125254; 2.6: a "
            "LoweringException), so a fix suggests torch.compile on MPS from 2.8 only",
            "torch/_inductor/codegen/mps.py (MetalScheduling); pytorch/pytorch#157957 (release "
            "feature: MPSInductor, 2.8.0, macOS 14+)"),
    ApiFact("MPS needs macOS 12.3", None, (2, 4),
            "the oldest macOS with an MPS device",
            "aten/src/ATen/mps/MPSDevice.mm MPSDevice::MPSDevice (checks an MPSGraph method of "
            "macOS 12.3, LSTMWithSourceTensor:...); EmptyTensor.cpp MPS_ERROR_RUNTIME_TOO_LOW"),
    ApiFact("MPS needs macOS 13.0", (2, 5), (2, 8),
            "the oldest macOS with an MPS device",
            "aten/src/ATen/mps/MPSDevice.mm MPSDevice::MPSDevice (checks an MPSGraph method of "
            "macOS 13, cumulativeSumWithTensor:axis:name:); pytorch/pytorch#139425"),
    ApiFact("MPS needs macOS 14.0", (2, 9), None,
            "the oldest macOS with an MPS device",
            "aten/src/ATen/mps/MPSDevice.mm MPSDevice::MPSDevice (checks an MPSGraph method of "
            "macOS 14, HermiteanToRealFFTWithTensor:axes:descriptor:name:); pytorch/pytorch#159275, "
            "pytorch/pytorch#163515"),
)
"""Behaviour the rules' evidence and fixes rely on."""


def holds(fact: ApiFact, version: tuple[int, int]) -> bool:
    """Whether ``fact`` holds for torch ``version`` (major, minor)."""
    if fact.since is not None and version < fact.since:
        return False
    return not (fact.until is not None and version > fact.until)


def behaviour(name: str) -> ApiFact:
    """The :data:`BEHAVIOUR` fact of that name."""
    return next(f for f in BEHAVIOUR if f.name == name)


MIN_MACOS = ((12, 3), (13, 0), (14, 0))
"""The macOS versions of the ``MPS needs macOS X.Y`` facts, oldest first."""


def min_macos(version: tuple[int, int]) -> tuple[int, int]:
    """The oldest macOS torch ``version`` (major, minor) finds an MPS device on: the
    ``MPS needs macOS`` fact of :data:`BEHAVIOUR` that holds for it (its source:
    ``MPSDevice::MPSDevice`` in aten/src/ATen/mps/MPSDevice.mm checks an MPSGraph method of
    that macOS before it looks for a device)."""
    for macos in reversed(MIN_MACOS):
        if holds(behaviour(f"MPS needs macOS {macos[0]}.{macos[1]}"), version):
            return macos
    return MIN_MACOS[0]


def mps_autocast(version: tuple[int, int]) -> str:
    """What ``torch.autocast(device_type="mps", ...)`` takes in torch ``version``: "fp16"
    (2.5), "fp16_bf16" (2.6 on; bfloat16 on macOS 14 only), "none" (before 2.5 it raises
    RuntimeError, so no fix may write it for those releases)."""
    if not holds(behaviour("float16 autocast on MPS"), version):
        return "none"
    return "fp16_bf16" if holds(behaviour("bfloat16 autocast on MPS"), version) else "fp16"


def compiles_for_mps(version: tuple[int, int]) -> bool:
    """Whether ``torch.compile(model)`` (inductor) compiles for MPS in torch ``version``."""
    return holds(behaviour("torch.compile on MPS"), version)


def torch_below_for_macos(macos: tuple[int, int]) -> tuple[int, int] | None:
    """The first torch release that finds no MPS device on ``macos`` (``torch<X.Y`` keeps
    MPS there), from the ``MPS needs macOS`` facts; None where every checked release has MPS
    (macOS 14 on), or where none has (before 12.3). An upgrade suggested to a Mac below macOS
    14 is capped so: ``pip install -U torch`` can install a release that has no MPS on it."""
    if macos < MIN_MACOS[0]:
        return None
    for major, minor in ((2, m) for m in range(MIN_TORCH[1], MAX_CHECKED[1] + 1)):
        if macos < min_macos((major, minor)):
            return (major, minor)
    return None


def upgrade_command(macos: tuple[int, int] | None) -> str:
    """``python -m pip install -U torch``, capped below the first release without MPS on
    this macOS (:func:`torch_below_for_macos`); uncapped where the macOS is unknown or 14+."""
    below = torch_below_for_macos(macos) if macos else None
    spec = f'"torch<{below[0]}.{below[1]}"' if below else "torch"
    return f"python -m pip install -U {spec}"


def api_in(version: tuple[int, int]) -> list[str]:
    """The ``torch.mps`` names of :data:`API` that release ``version`` has."""
    return [f.name for f in API if holds(f, version)]


_ASSIGN = re.compile(r"(PYTORCH_MPS_(?:HIGH|LOW)_WATERMARK_RATIO)\s*=\s*`?([^\s`),;]+)")


def assignments(text: str) -> list[dict[str, str]]:
    """Each suggestion of watermark values in ``text``: one dict per group of assignments.

    Assignments on one line (``HIGH=1.0 LOW=0.8``, or ``HIGH=1.0`` and ``LOW=0.8`` in one
    sentence) are one suggestion; a ratio named without a value is not an assignment."""
    out: list[dict[str, str]] = []
    for paragraph in re.split(r"\n\s*\n", text):
        found = {name: value for name, value in _ASSIGN.findall(paragraph)}
        if found:
            out.append(found)
    return out
