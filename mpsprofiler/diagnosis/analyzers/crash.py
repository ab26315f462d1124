"""Crash facts: what the uncaught exception was, where in the user's code, and its kind.

The kinds are recognised by the exact messages PyTorch and Python print
(aten/src/ATen/mps/MPSFallback.mm, MPSAllocator.mm, c10/cuda ...), every wording of each: users paste these, and rules key on the kind.
The location is the innermost frame of the user's own file, which is where the fix goes.
"""

from __future__ import annotations

import os
import re
from typing import Any

from ...events.payloads import Frame
from ...resources import is_own_file
from ...session.session import CrashInfo, Session
from ...units import fmt_bytes
from .common import start_method, training_loader
from .registry import analyzer


def _phrase(text: str) -> str:
    """A message Python wraps over lines: any whitespace between its words."""
    return r"\s+".join(text.split())


MISSING_DEVICE: tuple[tuple[str, str], ...] = (
    # c10/core/impl/DeviceGuardImplInterface.h, getDeviceGuardImpl: the first use of a device
    # type this build has no support for (`.to("mps")` on a Linux or Windows build)
    ("", r"PyTorch is not linked with support for (?P<device>mps|cuda) devices"),
    # the dispatcher: a tensor made on a device whose backend this build lacks
    # (`torch.zeros(1, device="mps")` on Linux); only the factories, every build has them
    ("", r"Could not run 'aten::empty(?:\.memory_format|_strided)' with arguments from the '(?P<device>MPS|CUDA)' backend"),
    # torch/cuda/__init__.py, _lazy_init: a build without CUDA (macOS, CPU wheels)
    ("cuda", r"Torch not compiled with CUDA enabled"),
    # torch/cuda/__init__.py, _lazy_init (torch._C._cuda_init): a CUDA build without a GPU driver
    ("cuda", r"Found no NVIDIA driver on your system"),
)
"""The messages torch gives a script that asks for a device this machine or build does not
have: (the device, or '' where the message names it, its pattern)."""


def missing_device(message: str) -> str | None:
    """``mps`` or ``cuda`` where ``message`` says that device is missing here, else None."""
    for device, rx in MISSING_DEVICE:
        m = re.search(rx, message)
        if m:
            return device or m.group("device").lower()
    return None


PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(rx))
    for kind, rx in (
        ("oom_mps", r"MPS backend out of memory"),
        ("oom_cuda", r"CUDA out of memory|CUDA error: out of memory|torch\.(?:cuda\.)?OutOfMemoryError"),
        ("oom_cpu", r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory)"),
        ("not_implemented_mps", r"is not current(?:ly)? implemented for the MPS device"),
        ("float64_mps", r"Cannot convert a MPS Tensor to float64|MPS framework doesn't support float64"),
        # torch's two wordings: empty_mps (aten/src/ATen/mps/EmptyTensor.cpp) and
        # checkSupportsBFloat16 (aten/src/ATen/native/mps/OperationUtils.mm, getMPSDataType)
        ("bf16_macos", r"MPS BFloat16 is only supported on MacOS 14|MPS bfloat16 type is supported on MacOS 14"),
        ("device_mismatch", (
            r"Expected all tensors to be on the same device"
            r"|is on \S+?, different from other tensors on"
            r"|Placeholder storage has not been allocated on MPS device"
            r"|Tensor for argument #\d+ '\w+' is on (?:CPU|GPU), but expected it to be on (?:CPU|GPU)"
            r"|Tensor on device \S+ is not on the expected device \S+?!"
        )),
        ("spawn_bootstrap", _phrase("An attempt has been made to start a new process before the "
                                    "current process has finished its bootstrapping phase")),
        ("worker_exited", r"DataLoader worker \(pid\(?s?\)? ?[\d, ]+\) exited unexpectedly"),
        ("device_missing", "|".join(rx.replace("?P<device>", "?:") for _, rx in MISSING_DEVICE)),
        # torch/csrc/autograd/saved_variable.cpp, SavedVariable::unpack: a backward that reaches
        # saved tensors an earlier backward freed, or a saved tensor changed in place since
        ("backward_twice", r"Trying to backward through the graph a second time"),
        ("inplace_modified", _phrase("one of the variables needed for gradient computation has been "
                                     "modified by an inplace operation")),
    )
)  # fmt: skip
CUDA_OOM_TYPES = ("OutOfMemoryError",)

_COLLATE_FILE = re.compile(r"torch[/\\]utils[/\\]data[/\\]_utils[/\\]collate\.py")
_UNEQUAL = re.compile(
    # torch.stack's check (aten/src/ATen/native/TensorShape.cpp, check_stack_inputs). In a
    # worker, collate_tensor_fn (torch/utils/data/_utils/collate.py) first makes a shared
    # storage of the batch's total elements and resize_s it to len(batch) copies of the
    # first sample: where the others hold fewer elements, that fails before the stack
    r"stack expects each tensor to be equal size|Trying to resize storage that is not resizable")


def collate_unequal(message: str, frames: list[Frame]) -> bool:
    """The DataLoader's default collate could not stack a batch's samples: they differ in
    shape. Only where the failing stack is collate's own (its file in the traceback, or in
    a worker's traceback copied into the message): the script's own ``torch.stack`` of
    unequal tensors is another bug."""
    if not _UNEQUAL.search(message):
        return False
    return bool(_COLLATE_FILE.search(message)) or any(_COLLATE_FILE.search(str(f.get("file", ""))) for f in frames)

_DEVICES = (
    re.compile(r"found at least two devices, (?P<a>[\w:]+) and (?P<b>[\w:]+)"),
    re.compile(r"is on (?P<a>[\w:]+), different from other tensors on (?P<b>[\w:]+)"),
    re.compile(r"Tensor on device (?P<a>[\w:]+) is not on the expected device (?P<b>[\w:]+)"),
    re.compile(r"is on (?P<a>CPU|GPU), but expected it to be on (?P<b>CPU|GPU)"),
)
_ARGUMENT = re.compile(r"but got (?P<arg>[\w.\[\]]+) is on|Tensor for argument #\d+ '(?P<arg2>\w+)'")
_OP = re.compile(r"operator '(?P<op>aten::[\w.]+)'")
_TRIED = re.compile(r"Tried to allocate (?P<n>[\d.]+ ?[KMGTP]?i?B)")
_TRIED_BYTES = re.compile(r"you tried to allocate (?P<n>\d+) bytes")
_MPS_FIGURES = re.compile(
    r"MPS allocated: (?P<alloc>[^,]+), other allocations: (?P<other>[^,]+), max allowed: (?P<max>[^)]+)\)"
)


def classify(crash_type: str, message: str) -> str:
    """The crash kind of an exception type and message ("other" when none matches)."""
    for kind, pattern in PATTERNS:
        if pattern.search(message):
            return kind
    if crash_type in CUDA_OOM_TYPES:
        return "oom_cuda"
    return "other"


def user_frame(crash: CrashInfo) -> Frame | None:
    """The innermost frame in the user's code, skipping mpsprofiler's own hooks."""
    for frame in reversed(crash.frames):
        if frame.get("user") and not is_own_file(str(frame.get("file", ""))):
            return frame
    return crash.user_frame


CRASH_FACTS: tuple[str, ...] = (
    "crash_argument", "crash_code", "crash_devices", "crash_file", "crash_func", "crash_kind",
    "crash_kind_inferred", "crash_line", "crash_message", "crash_op", "crash_step", "crash_summary",
    "crash_type", "crashed", "oom_mps_allocated", "oom_mps_max_allowed", "oom_mps_other", "oom_requested",
)
"""Every fact the ``crash`` analyzer may return (declared: no other analyzer may provide one)."""


@analyzer("crash", provides=CRASH_FACTS)
def crash_facts(session: Session) -> dict[str, Any]:
    crash = session.crash
    if crash is None:
        return {"crashed": session.status == "crashed", "crash_kind": None}
    message = crash.message or ""
    kind = classify(crash.type, message)
    if kind == "other" and collate_unequal(message, crash.frames):
        kind = "collate_unequal"
    facts: dict[str, Any] = {
        "crashed": True,
        "crash_type": crash.type,
        "crash_message": message,
        "crash_summary": _first_line(message),
        "crash_kind": kind,
        "crash_kind_inferred": False,
        "crash_step": session.steps.last_index + 1,
    }
    frame = worker_frame(message) or user_frame(crash)  # a worker's raise, not the loop's `for` line
    if frame is not None:
        facts["crash_file"] = _short_path(str(frame.get("file", "")), session.run.get("cwd"))
        facts["crash_line"] = frame.get("line")
        facts["crash_func"] = frame.get("func")
        facts["crash_code"] = str(frame.get("code") or "").strip() or None
    facts["crash_op"] = _group(_OP, message, "op")
    facts["crash_devices"] = _devices(message, kind)
    facts["crash_argument"] = _argument(message)
    facts["oom_requested"] = _group(_TRIED, message, "n")
    tried = _group(_TRIED_BYTES, message, "n")
    if tried and facts["oom_requested"] is None:
        facts["oom_requested"] = fmt_bytes(int(tried))
    figures = _MPS_FIGURES.search(message)
    if figures:
        facts["oom_mps_allocated"] = figures.group("alloc").strip()
        facts["oom_mps_other"] = figures.group("other").strip()
        facts["oom_mps_max_allowed"] = figures.group("max").strip()
    if kind == "worker_exited":
        _maybe_bootstrap(session, facts)
    return facts


def _maybe_bootstrap(session: Session, facts: dict[str, Any]) -> None:
    """A spawned worker that dies before the first batch: almost always the missing
    ``if __name__ == "__main__":`` guard. The parent only sees "worker exited"; the
    bootstrapping message went to the worker's stderr."""
    loader = training_loader(session)
    method = start_method(session, loader) if loader else None  # the fact is the dataloader analyzer's
    if method in ("spawn", "forkserver") and session.steps.total_batches == 0:
        facts["crash_kind"] = "spawn_bootstrap"
        facts["crash_kind_inferred"] = True


def _devices(message: str, kind: str) -> str | None:
    for pattern in _DEVICES:
        m = pattern.search(message)
        if m:
            a, b = m.group("a"), m.group("b")
            if a in ("CPU", "GPU"):
                a, b = a.lower(), b.lower()
            return f"{a} and {b}"
    if "Placeholder storage has not been allocated on MPS device" in message:
        return "cpu and mps"
    return None


def _argument(message: str) -> str | None:
    m = _ARGUMENT.search(message)
    if not m:
        return None
    return m.group("arg") or m.group("arg2")


def _group(pattern: re.Pattern[str], text: str, name: str) -> str | None:
    m = pattern.search(text)
    return m.group(name) if m else None


def _first_line(message: str) -> str:
    line = message.strip().splitlines()[0] if message.strip() else ""
    return line if len(line) <= 300 else line[:299] + "…"


def excerpt(message: str, limit: int = 160) -> str:
    """The crash message as one clean line for a summary: its first non-empty line,
    spaces collapsed, cut at a word with an ellipsis.

    A Dynamo error's message runs on over a "from user code:" traceback and a
    TORCHDYNAMO_VERBOSE hint; the first ``limit`` characters of the whole message cut
    that traceback mid-word and the location printed after it read as part of the code
    (``self.log("train_loss", los at train.py:16``).
    """
    lines = [" ".join(line.split()) for line in message.splitlines()]
    line = next((x for x in lines if x), "")
    if len(line) <= limit:
        return line
    cut = line[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:") + "…"


_TRACED = re.compile(r'^from user code:\s*\n\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)', re.M)


def traced_frame(message: str) -> Frame | None:
    """The user's frame Dynamo was tracing when it failed (its "from user code:" block):
    where the fix goes, while the Python traceback's innermost user frame is the call
    of the compiled model (``trainer.fit(...)``)."""
    m = _TRACED.search(message)
    if not m or is_own_file(m.group("file")):
        return None
    return {"file": m.group("file"), "line": int(m.group("line")), "func": m.group("func"), "user": True}


_ORIGINAL = re.compile(r"^Original Traceback \(most recent call last\):\n(?P<tb>.*)", re.M | re.S)
_TB_FILE = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>[^\n]+)\n(?:[ \t]{4,}(?P<code>\S[^\n]*))?',
                      re.M)
_LIBRARY = ("site-packages", "dist-packages", f"{os.sep}lib{os.sep}python")


def worker_frame(message: str) -> Frame | None:
    """The user's innermost frame in the traceback torch copies from a DataLoader worker
    into the main process's exception ("Caught ValueError in DataLoader worker process 0.
    Original Traceback ..."): the ``__getitem__`` line that raised, where the main process's
    own traceback ends at its ``for x, y in loader:`` line."""
    m = _ORIGINAL.search(message)
    if not m:
        return None
    frames = [f for f in _TB_FILE.finditer(m.group("tb"))
              if not f.group("file").startswith("<") and not any(part in f.group("file") for part in _LIBRARY)
              and not is_own_file(f.group("file"))]
    if not frames:
        return None
    f = frames[-1]
    return {"file": f.group("file"), "line": int(f.group("line")), "func": f.group("func").strip(),
            "code": (f.group("code") or "").strip(), "user": True}


def raised_at(crash: CrashInfo) -> Frame | None:
    """Where the crash was raised in the user's code, as the crash finding and the reports'
    Crash section name it: in a DataLoader worker, the worker's own line (:func:`worker_frame`),
    else the crash's user frame."""
    return worker_frame(crash.message or "") or crash.user_frame


def crash_line(crash: dict[str, Any]) -> str:
    """``SyntaxError: '(' was never closed (syn.py, line 2) at /x/syn.py:2``: the crash as the
    summary prints it (the TUI's crash finding shows the same line)."""
    message = str(crash.get("message") or "")
    worker = worker_frame(message)
    where = traced_frame(message) or worker or (crash.get("where") if isinstance(crash.get("where"), dict) else {})
    loc = f" at {where.get('file')}:{where.get('line')}" if where else ""
    said = _worker_said(message, str(crash.get("type"))) if worker else None
    return f"{crash.get('type')}: {said or excerpt(message)}{loc}"


def _worker_said(message: str, crash_type: str) -> str | None:
    """``corrupt record 77 (in DataLoader worker process 0)``: the worker's own error, the
    last line of the traceback torch copied, where the first line only says it was caught."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    which = re.search(r"in (DataLoader worker process \d+)", lines[0]) if lines else None
    if not which or len(lines) < 2:
        return None
    last = lines[-1]
    if last.startswith(crash_type + ":"):
        last = last[len(crash_type) + 1:].strip()
    return f"{excerpt(last, 120)} (in {which.group(1)})"


def crash_title(crash: dict[str, Any], steps: Any) -> str:
    """``Crashed after 6 steps (0 to 5): <crash_line>``: the crash finding's title, in the
    summary and the TUI alike. ``steps``: the steps that finished.

    Steps are numbered from 0 everywhere else (step 0 is the warm-up: "steps 1 to 123"), but
    this said "Crashed at step 6" (the count) for a loop that raised "bad batch at step 5"
    in its 0-based step 5, after that step's optimizer step: it reads as a mismatch. The
    count and the numbers of the finished steps leave no doubt which step it was."""
    if not isinstance(steps, int) or steps <= 0:
        return f"Crashed before its first step: {crash_line(crash)}"
    done = "after its first step (step 0)" if steps == 1 else f"after {steps} steps (0 to {steps - 1})"
    return f"Crashed {done}: {crash_line(crash)}"


def _short_path(path: str, cwd: Any) -> str:
    """Relative to the run's working directory when inside it: what an editor opens."""
    if cwd and path.startswith(str(cwd).rstrip(os.sep) + os.sep):
        return os.path.relpath(path, str(cwd))
    return path
