"""What one sampled step did, op by op, and the ``ops`` event that describes it.

A :class:`StepRecord` lives for one sampled step. :meth:`StepRecord.record` runs once per
op inside the dispatch mode, so it does the least it can: a dict lookup per (op, module),
a walk over the tensor arguments, and a stack walk only for the rare ops that need a
source line (syncs, and the first call of each (op, module)).
"""

from __future__ import annotations

import ast
import linecache
import re
import weakref
from collections.abc import Callable, Iterable
from typing import Any

import torch

from ..events.payloads import OpsFields
from .leak_owner import parsed, source_segment, statements
from .modules import ModuleTracker
from .ops_leaks import LeakTracker, code_range
from .ops_sites import (
    COPY_OPS,
    FrameFinder,
    TensorPatches,
    Via,
    scalar_kind,
    source_line,
    statement_text,
    static_sync_kind,
)

MAX_KEYS = 2_000  # distinct (op, module) per sampled step; the rest go to module "*"
MAX_OPS_SENT = 300  # op entries per event, most host time first
MAX_SYNC_WALKS = 2_000  # stack walks for syncs per sampled step
MAX_F64_WALKS = 2_000
"""Stack walks for float64 ops per sampled step: each is attributed to its own line (an
(op, module)'s first call site is where that op first ran, in any dtype: ``w * 100`` on
one line would take the float64 ``0.99 * stats`` of the next)."""
MAX_CARRIED = 200_000  # weak references to model-derived tensors kept across sampled steps
_SKIPPED_NAMESPACES = ("profiler::",)  # record_function markers, not work
_SEQUENCES = (list, tuple)
_FLAGS = {torch.float64: 1, torch.bfloat16: 2,
          **{d: 4 for d in (torch.complex32, torch.complex64, torch.complex128)}}  # fmt: skip
"""dtype -> 1 float64, 2 bfloat16, 4 complex (counted per op); other dtypes 0."""

_INDEX = "aten::index.Tensor"
_MASKS = (torch.bool, torch.uint8)
_DEVICE_ARG = re.compile(r"\bdevice\s*=\s*([^,)\s]+(?:\([^)]*\))?)")
_CONFIG_ROOTS = frozenset({"args", "cfg", "config", "conf", "opt", "opts", "options", "hparams", "self", "settings",
                           "FLAGS", "training_args"})


def names_a_device(statement: str) -> bool:
    """Whether a statement passes a factory a device the script chose (on a Mac, the
    model's): a name (``device=device``), a setting (``args.device``, ``self.device``) or a
    string that is not the CPU. Not ``device=t.device`` of a tensor (whatever ``t`` is on:
    a CPU-side tensor's stays on the CPU on a Mac), nor a call or the CPU written out."""
    for m in _DEVICE_ARG.finditer(statement):
        arg = m.group(1)
        if arg.strip("'\"").lower().startswith("cpu") or "(" in arg:
            continue
        if arg[0] in "'\"" or re.fullmatch(r"[A-Za-z_]\w*", arg):
            return True
        parts = arg.split(".")
        if all(re.fullmatch(r"[A-Za-z_]\w*", p) for p in parts) and (parts[-1] != "device" or parts[0] in _CONFIG_ROOTS):
            return True
    return False


_DEVICE_SITES: dict[tuple[str, int], bool] = {}
_TO_DEVICE = re.compile(r"\.(?:to|cuda)\(\s*(?!['\"]cpu['\"])(?:['\"]\w+['\"]|[A-Za-z_][\w.]*)?\s*[,)]")
"""``.to(device)``, ``.to("mps")``, ``.cuda()``: a tensor put on the script's device."""
_DEVICE_NAMES: dict[Any, frozenset[str]] = {}


def _device_names(code: Any) -> frozenset[str]:
    """Names ``code`` (a function, or a module) assigns a tensor it put on its device to
    (:data:`_TO_DEVICE`, :func:`names_a_device`), from its syntax tree; cached per code.

    A function's own source is parsed alone (:func:`_function_block`), not its whole file:
    the first sampled step parsed every file of the user's frames, ~2.5 ms of its ~10 ms
    for a 200-line file (``benchmarks/workload.py``), and the cost grew with the file, not
    with the function. A module's code, or a function whose source does not parse alone,
    reads the whole file's tree (the leak readers' cache, :func:`leak_owner.parsed`)."""
    known = _DEVICE_NAMES.get(code)
    if known is not None:
        return known
    names: set[str] = set()
    lines = linecache.getlines(code.co_filename)
    first, last = code_range(code, len(lines))
    block = _function_block(code, lines, last)
    if block is not None:
        nodes: Iterable[ast.AST] = ast.walk(block[0])
        said_in, offset = block[1], block[2]
    else:
        tree = parsed(code.co_filename)
        # one walk of a file (the leak readers' too), not one per function
        nodes, said_in, offset = (statements(tree)[0] if tree is not None else ()), lines, 0
    for node in nodes:
        if not isinstance(node, ast.Assign) or not first <= node.lineno + offset <= last:
            continue
        value = source_segment(said_in, node.value)
        said = value if value is not None else " ".join(said_in[node.lineno - 1:(node.end_lineno or node.lineno)])
        if ".to(" not in said and ".cuda(" not in said and "device" not in said:
            continue
        if not (_TO_DEVICE.search(said) or names_a_device(said)):
            continue
        for target in node.targets:
            for n in ast.walk(target):
                if isinstance(n, ast.Name):
                    names.add(n.id)
    if len(_DEVICE_NAMES) > 1_000:
        _DEVICE_NAMES.clear()
    found = _DEVICE_NAMES[code] = frozenset(names)
    return found


def _function_block(code: Any, lines: list[str], last: int) -> tuple[ast.Module, list[str], int] | None:
    """``code``'s function (decorators, ``def`` and body) parsed alone: the tree, the lines
    it was parsed from, and what to add to its line numbers for the file's; None for code
    that is no ``def`` (a module, a lambda, a comprehension) or a block that does not parse.

    The block runs from the code's first line past ``last`` (its last line, nested
    functions included) to the first line indented no deeper than the ``def``. A line
    like that inside a string or a bracket ends the block early, where it cannot parse
    (an unterminated string, an open bracket): then the caller reads the whole file, so
    the block never yields statements the file's tree does not hold at those lines. An
    indented ``def`` (a method) is parsed under ``if 1:``."""
    start = code.co_firstlineno
    if code.co_name == "<module>" or not 0 < start <= last <= len(lines):
        return None
    head = lines[start - 1]
    text = head.lstrip()
    if not text.startswith(("def ", "async def ", "@")):
        return None
    indent = len(head) - len(text)
    end = last
    while end < len(lines):
        line = lines[end]  # the file's line end + 1
        body = line.lstrip()
        if body and not body.startswith("#") and len(line) - len(body) <= indent:
            break
        end += 1
    block = lines[start - 1:end]
    prefix = ["if 1:\n"] if indent else []
    try:
        tree = ast.parse("".join(prefix + block))
    except (SyntaxError, ValueError):
        return None
    return tree, prefix + block, start - 1 - len(prefix)


def _holds_plain_tensor(frame: Any) -> bool:
    """Whether ``frame`` holds a tensor without gradients (one it may have put on its device):
    only then is its source read (:func:`_device_names`), and once per code. A script's
    module frame under a ``main()`` mostly never does, and its file is not parsed for it."""
    return any(isinstance(v, torch.Tensor) and not v.requires_grad for v in list(frame.f_locals.values()))


def _masked(args: Any) -> bool:
    """Whether ``aten::index.Tensor``'s indices hold a boolean (or uint8) mask."""
    indices = args[1] if len(args) > 1 else None
    if not isinstance(indices, (list, tuple)):
        return False
    return any(isinstance(i, torch.Tensor) and i.dtype in _MASKS for i in indices)


_PATCHED_OPS = {kind: f"Tensor.{name}" for name, kind in TensorPatches.NAMES}
"""Sync kind of a patched Tensor method -> the name it is reported under."""

OpInfo = tuple[Any, ...]
"""(name, sync kind or None, is a copy op, pairing base, is a backward op), or () for ops
that are not recorded."""
_BACKWARD = re.compile(r"_backward(?:_data|_input|_weight)?$")


class _Agg:
    __slots__ = ("calls", "devices", "dtypes", "host", "shapes", "site")

    def __init__(self, site: tuple[str, int] | None) -> None:
        self.calls = 0
        self.shapes: tuple[Any, ...] | None = None  # of the first call (the census compares them)
        self.host = 0.0
        self.devices: set[torch.device] = set()
        self.dtypes: set[torch.dtype] = set()
        self.site = site


def op_info(func: Any) -> OpInfo:
    name = func.name()
    if name.startswith(_SKIPPED_NAMESPACES):
        return ()
    base = name.split("::", 1)[-1].split(".", 1)[0]
    backward = _BACKWARD.search(base) is not None
    # "_pdist_forward" / "_pdist_backward" and "_ctc_loss" / "_ctc_loss_backward" pair up
    base = _BACKWARD.sub("", base) if backward else base.removesuffix("_forward")
    return (name, static_sync_kind(name), name in COPY_OPS, base, backward)


def tensors_of(args: Any, kwargs: dict[str, Any] | None) -> list[torch.Tensor]:
    """Tensors among the arguments, one list level deep (TensorList args)."""
    found: list[torch.Tensor] = []
    Tensor = torch.Tensor
    for seq in (args, kwargs.values() if kwargs else ()):
        for a in seq:
            if isinstance(a, Tensor):
                found.append(a)
            elif isinstance(a, (list, tuple)):
                found.extend(x for x in a if isinstance(x, Tensor))
    return found


def _shapes(tensors: list[torch.Tensor]) -> tuple[Any, ...] | None:
    try:
        return tuple(t.shape for t in tensors)
    except Exception:  # a tensor subclass without sizes (some nested layouts)
        return None


_NAMES: dict[Any, str] = {}


def _name(value: torch.device | torch.dtype) -> str:
    """``cuda:0``, ``float32``: the event's spelling of a device or dtype (a few distinct
    ones per run, each spelt out hundreds of times per event)."""
    name = _NAMES.get(value)
    if name is None:
        name = str(value).replace("torch.", "") if isinstance(value, torch.dtype) else str(value)
        if len(_NAMES) < 1_000:
            _NAMES[value] = name
    return name


def _names(values: set[Any]) -> list[str]:
    """The sorted, distinct names of a set of devices or dtypes (mostly one)."""
    if len(values) == 1:
        for value in values:
            return [_name(value)]
    return sorted({_name(v) for v in values})


def _site_fields(site: tuple[str, int] | None) -> dict[str, Any]:
    return {"file": site[0], "line": site[1]} if site else {"file": "", "line": 0}


class StepRecord:
    """Aggregates of one sampled step; ``info`` is shared across steps (id(op) -> (OpInfo, op))."""

    def __init__(self, tracker: ModuleTracker, finder: FrameFinder, patches: TensorPatches,
                 info: dict[int, tuple[OpInfo, Any]], carried: dict[int, Any] | None = None,
                 leaks: LeakTracker | None = None, device_kind: str | None = None) -> None:  # fmt: skip
        self._tracker = tracker
        self._derive: bool | None = None if device_kind is None else device_kind == "cpu"
        """Whether to follow which tensors come from the model (:meth:`model_derived`): only
        a CPU run asks (its CPU tensors' syncs are what a Mac would pay; an accelerator
        run's CPU tensors stay on the CPU there too, and its event drops their syncs).
        None until the model's device is known."""
        self._leaks = leaks
        self._carried = carried if carried is not None else {}
        self._finder = finder
        self._patches = patches
        self._info = info
        self.agg: dict[tuple[str, str], _Agg] = {}
        self.syncs: dict[tuple[str, str, str, str, int, str, Via | None], int] = {}
        self.f64: dict[tuple[str, str, int, str], int] = {}
        self.f64_calls = 0
        self.f64_walks = 0
        self.bf16 = 0
        self.complex = 0
        self.walks = 0
        self.op_count = 0
        self.forward_module: dict[str, str] = {}

    def record(self, func: Any, args: Any, kwargs: dict[str, Any], out: Any, dt: float) -> None:
        # keyed by id: OpOverload.__hash__ is Python code; the entry holds ``func``, so
        # its id is never reused while the entry exists
        entry = self._info.get(id(func))
        if entry is None:
            entry = self._info[id(func)] = (op_info(func), func)
        info = entry[0]
        if not info:
            return
        name, sync_kind, is_copy, base, backward = info
        tracker = self._tracker
        module = tracker._stack[-1][0] if tracker._stack else tracker.current()
        if module:
            if not backward:
                self.forward_module.setdefault(base, module)
        elif backward:
            # the autograd node was not mapped (graph shapes differ across torch releases):
            # a backward op belongs where its forward op ran
            module = self.forward_module.get(base, "")
        key = (name, module)
        agg = self.agg.get(key)
        if agg is None:
            if len(self.agg) >= MAX_KEYS:
                key = (name, "*")
                agg = self.agg.get(key)
            if agg is None:
                agg = self.agg[key] = _Agg(self._finder.site(3))
        calls = agg.calls = agg.calls + 1
        agg.host += dt
        self.op_count += 1
        Tensor = torch.Tensor
        tensors: list[torch.Tensor] = []
        for a in args:
            if isinstance(a, Tensor):
                tensors.append(a)
            elif a.__class__ in _SEQUENCES:
                for x in a:
                    if isinstance(x, Tensor):
                        tensors.append(x)
        if kwargs:
            tensors.extend(tensors_of((), kwargs))
        n_in = len(tensors)
        if isinstance(out, Tensor):
            tensors.append(out)
        elif out.__class__ in _SEQUENCES:
            for x in out:
                if isinstance(x, Tensor):
                    tensors.append(x)
        n = len(tensors)
        if n > n_in:
            derive = self._derive
            if derive is None and tracker.root_devices:  # the model's first call this step
                derive = self._derive = (tracker.model_device() or "cpu").startswith("cpu")
            if not n_in and derive is not False and kwargs.get("device") is not None and self._names_device():
                self._carry(tensors, 0)  # `torch.randn(..., device=device)`: on the Mac's device there
            carried = self._carried
            for i in range(n_in if derive is not False else 0):  # (inline: _carry's test)
                t = tensors[i]
                if t.requires_grad:
                    self._carry(tensors, n_in)
                    break
                ref = carried.get(id(t))
                if ref is not None and ref() is t:
                    self._carry(tensors, n_in)
                    break
            leaks = self._leaks
            if leaks is not None and leaks._current is not None:
                if n - n_in == 1:  # one output (most ops): in place when it is one of the inputs
                    t = tensors[n_in]
                    for i in range(n_in):
                        if tensors[i] is t:
                            break
                    else:
                        leaks.on_op(name, module, tensors, n_in, agg.site, backward)
                else:
                    leaks.on_op(name, module, tensors, n_in, agg.site, backward)
        if calls == 1:
            agg.shapes = _shapes(tensors)
        dtypes = agg.dtypes
        if calls <= 4:  # an (op, module) keeps its devices from call to call: the first few
            devices = agg.devices
            for t in tensors:
                devices.add(t.device)
        flags = 0
        scalar_f64 = False
        for i, t in enumerate(tensors):
            dtype = t.dtype
            dtypes.add(dtype)
            flag = _FLAGS.get(dtype, 0)
            if flag:
                if flag == 1:
                    # a conversion away from float64 is the fix, not the problem; results count
                    if i >= n_in or (not is_copy and t.dim() > 0):
                        flags |= 1
                        scalar_f64 = scalar_f64 or t.dim() == 0
                else:
                    flags |= flag
        if scalar_f64 and self._finder.f64_not_on_mps(3):
            # a GradScaler's float64 reciprocal of its (0-dim) scale: MPS takes a float32
            # branch there (asked of 0-dim float64 ops only: one frame lookup each)
            flags &= ~1
        if flags:
            if flags & 1:
                self.f64_calls += 1
                site = None
                if self.f64_walks < MAX_F64_WALKS:
                    self.f64_walks += 1
                    site = self._finder.site(3)
                site = site or agg.site or ("", 0)
                fkey = (module, site[0], site[1], name)
                self.f64[fkey] = self.f64.get(fkey, 0) + 1
            if flags & 2:
                self.bf16 += 1
            if flags & 4:
                self.complex += 1
        if sync_kind is None and name == _INDEX and n_in and tensors[0].device.type == "cpu" and _masked(args):
            # `x[mask]`: on an accelerator the mask's nonzero() (its true count) is read back
            # first; a CPU kernel does it inside the op, so only the CPU run needs telling
            sync_kind = "nonzero"
        if sync_kind is None and not is_copy or self._patches.active is not None:
            return  # (inside a wrapped tolist()/cpu(), that wrapper counted the sync)
        if sync_kind is not None:
            source = tensors[0].device.type if tensors else "cpu"
            if source == "cpu" and not (tensors and self.model_derived(tensors[0])):
                return  # a CPU-side tensor (indices, Python numbers): it stays on the CPU on a Mac
            self.sync(sync_kind, name, module, source, agg)
        elif n_in and n > n_in:
            if name == "aten::copy_":  # copy_(self, src, non_blocking=False)
                dst, src = tensors[0], tensors[n_in - 1]
                non_blocking = args[2] if len(args) > 2 else kwargs.get("non_blocking", False)
            else:
                src, dst, non_blocking = tensors[0], tensors[n_in], kwargs.get("non_blocking", False)
            if dst.device.type == "cpu" and src.device.type not in ("cpu", "meta") and not non_blocking:
                self.sync("to_cpu", name, module, src.device.type, agg)

    def sync(self, kind: str, op: str, module: str, device: str, agg: _Agg | None) -> None:
        """One host-device sync (actual, or predicted when ``device`` is the CPU)."""
        site = agg.site if agg is not None else None
        via: Via | None = None
        if self.walks < MAX_SYNC_WALKS:
            self.walks += 1
            found, printing, internal, via = self._finder.find(3)
            if internal and device == "cpu":
                return  # a CPU scalar of torch's own bookkeeping: on a Mac it stays on the CPU
            site = found or site
            module = self._finder.owner(site) or module
            if printing:
                kind = "print"
        if kind == "item" and op.endswith("_local_scalar_dense"):
            kind = scalar_kind(source_line(site))
        file, line = site if site is not None else ("", 0)
        key = (kind, op, module, file, line, device, via)
        self.syncs[key] = self.syncs.get(key, 0) + 1

    def patched_call(self, kind: str, tensor: torch.Tensor) -> None:
        device = tensor.device.type
        if device == "cpu" and not self.model_derived(tensor):
            return
        self.sync(kind, _PATCHED_OPS[kind], self._tracker.current(), device, None)

    # -- what would live on the accelerator on a Mac ------------------------------------
    def model_derived(self, tensor: torch.Tensor) -> bool:
        """Whether ``tensor`` comes from the model's computation: it needs gradients, or an
        op of a sampled step made it from such a tensor. Those would live on the model's
        device on a Mac; CPU-side tensors (``torch.randint`` indices, ``torch.tensor(x)``)
        stay on the CPU there, so reading them back is no sync."""
        if tensor.requires_grad:
            return True
        ref = self._carried.get(id(tensor))
        return ref is not None and ref() is tensor

    def _names_device(self) -> bool:
        """Whether the user's statement that made a tensor factory's output passes it a
        device that is not written as the CPU (``torch.rand(256, device=device)``): on a Mac
        that tensor is on the model's device, and reading it back (``torch.nonzero(y)``,
        ``y.tolist()``) waits for the device. Cached per call site (a few per step)."""
        site = self._finder.site(4)
        if site is None:
            return False
        known = _DEVICE_SITES.get(site)
        if known is None:
            known = _DEVICE_SITES[site] = names_a_device(statement_text(*site))
            if len(_DEVICE_SITES) > 2_000:
                _DEVICE_SITES.clear()
        return known

    def seed_device_locals(self, frame: Any) -> None:
        """At a sampled step's start, mark the tensors the training loop holds that it put on
        its device (``x, y = x.to(device), y.to(device)``, ``y = torch.rand(n, device=device)``):
        made in the step before, they are no output of this step's ops, and a read of them
        after ``optimizer.step()`` (``y.tolist()`` for a metric) would wait for a Mac's GPU.
        Only the user's frames, and only a CPU run asks (see ``_derive``)."""
        if self._derive is False:
            return
        finder = self._finder
        try:
            while frame is not None:
                code = frame.f_code
                if finder.is_user(code):
                    names = _DEVICE_NAMES.get(code)
                    if names is None and _holds_plain_tensor(frame):
                        names = _device_names(code)
                    if names:
                        for name, value in list(frame.f_locals.items()):
                            if name in names and isinstance(value, torch.Tensor) and not value.requires_grad:
                                self._carry([value], 0)
                frame = frame.f_back
        except Exception:
            pass  # the step's predictions only: the tensors read after it go unpredicted, as before

    def _carry(self, tensors: list[torch.Tensor], n_in: int) -> None:
        """Mark the outputs of an op that has a model-derived input (weakly: ids are
        checked against the object, so a reused id is not taken for the old tensor)."""
        carried = self._carried
        if len(carried) >= MAX_CARRIED:
            for key in [k for k, r in carried.items() if r() is None]:
                del carried[key]
            if len(carried) >= MAX_CARRIED:
                carried.clear()
        for t in tensors[n_in:]:
            if not t.requires_grad:
                try:
                    carried[id(t)] = weakref.ref(t)
                except TypeError:
                    pass

    def census(self) -> frozenset[Any]:
        """What this step ran, to compare with other sampled steps: each (op, module) with
        its call site, calls, first shapes, devices and dtypes; the syncs and float64 sites
        with their counts; placement mismatches. Equal censuses mean the accounting of one
        more such step would say nothing new (:mod:`.ops_schedule`)."""
        rows: list[Any] = [(key, a.site, a.calls, a.shapes, frozenset(a.devices), frozenset(a.dtypes))
                           for key, a in self.agg.items()]  # fmt: skip
        rows.extend(("sync", key, n) for key, n in self.syncs.items())
        rows.extend(("f64", key, n) for key, n in self.f64.items())
        rows.append(("mixed", self.bf16, self.complex))
        rows.extend(("mismatch", m, pair) for m, pair in self._tracker.mismatches.items())
        return frozenset(rows)

    # -- the event --------------------------------------------------------------------
    def build(self, kind: str, mps_check: Callable[[str], bool] | None, mps_type: str) -> OpsFields:
        """The ``ops`` event fields of this step (without step / timing fields)."""
        items = sorted(self.agg.items(), key=lambda kv: kv[1].host, reverse=True)
        ops = []
        for (op, module), agg in items[:MAX_OPS_SENT]:
            site = agg.site
            ops.append({"op": op, "calls": agg.calls, "host_s": round(agg.host, 7),
                        "devices": _names(agg.devices), "module": module, "dtypes": _names(agg.dtypes),
                        "file": site[0] if site else "", "line": site[1] if site else 0})  # fmt: skip
        syncs: list[dict[str, Any]] = []
        for (skind, op, module, file, line, device, via), calls in self.syncs.items():
            if device == "cpu" and kind != "cpu":
                continue  # a CPU tensor on an accelerator run: nothing to wait for
            entry = {"kind": skind, "op": op, "calls": calls, "module": module, "file": file,
                     "line": line, "code": source_line((file, line)) if file else "", "device": device}  # fmt: skip
            if via is not None:  # the library code that made the call inside the user's line
                entry["via"] = {"file": via[0], "line": via[1], "function": via[2],
                                "code": statement_text(via[0], via[1])}  # fmt: skip
            if device == "cpu":
                entry["predicted"] = True
            syncs.append(entry)
        syncs.sort(key=lambda s: s["calls"], reverse=True)
        f64_sites = sorted(self.f64.items(), key=lambda kv: kv[1], reverse=True)[:5]
        misses = []
        if kind == "mps" and mps_check is not None:
            for (op, module), agg in items:
                if any(d.type == mps_type for d in agg.devices) and not mps_check(op):
                    misses.append({"op": op, "calls": agg.calls, "host_s": round(agg.host, 7),
                                   "module": module, **_site_fields(agg.site)})  # fmt: skip
        return {
            "device_kind": kind,
            "model_device": self._tracker.model_device(),
            "ops": ops,
            "ops_dropped": max(0, len(items) - MAX_OPS_SENT),
            "syncs": syncs,
            "float64": {
                "calls": self.f64_calls,
                "sites": [{"module": m, "file": f, "line": ln, "op": op, "calls": n,
                           "code": source_line((f, ln)) if f else ""}
                          for (m, f, ln, op), n in f64_sites],
            },
            "bf16_complex": {"bfloat16": self.bf16, "complex": self.complex},
            "mismatch": [{"module": m, "param_device": p, "input_device": i}
                         for m, (p, i) in sorted(self._tracker.mismatches.items())],
            "mps_kernel": misses,
        }
