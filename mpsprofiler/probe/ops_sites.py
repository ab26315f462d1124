"""Where in the user's code an op came from, and the syncs a dispatch mode cannot see.

Only used on sampled steps, for the few ops that need a source line (syncs, fallbacks,
float64): walking ``sys._getframe`` with a per-code-object cache costs ~1-2 µs. The leak
tracker asks for the user line of every op outside a module (hundreds per step: each op
of a single-tensor optimizer); :meth:`FrameFinder.user_site` answers those from the
innermost calling frame, once per frame (see there).

``Tensor.tolist``, ``Tensor.cpu`` and printing never reach a ``TorchDispatchMode`` on a
CPU tensor (no op is dispatched; ``torch._tensor_str`` even disables modes), yet each is a
host-device sync on a Mac. :class:`TensorPatches` wraps them during sampled steps only
and calls the original unchanged.
"""

from __future__ import annotations

import functools
import inspect
import linecache
import os
import sys
import sysconfig
import threading
from collections.abc import Callable
from types import CodeType
from typing import Any

import torch

from ..resources import OWN_DIR
from .transparent import hide_from_warnings

Site = tuple[str, int]
"""(file, line) of a call in the user's code."""
Via = tuple[str, int, str]
"""(file, line, function) of the innermost library frame a call passed through."""

_SEP = os.sep
_UNSET = object()
_RESUMABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


def _dir_of(path: str | None) -> str | None:
    return os.path.dirname(os.path.abspath(path)) + _SEP if path else None


class FrameFinder:
    """Innermost frame of the user's code: not torch, not mpsprofiler, not the stdlib.

    Third-party packages (site-packages) count as "library": the user's own call site
    above them is preferred, and the library frame is used only when no user frame exists.
    """

    def __init__(self) -> None:
        skip = [_dir_of(torch.__file__), OWN_DIR]
        for name in ("torchgen", "functorch"):
            module = sys.modules.get(name)
            skip.append(_dir_of(getattr(module, "__file__", None)))
        self._skip = tuple(p for p in skip if p)
        paths = sysconfig.get_paths()
        self._stdlib = tuple(
            {os.path.abspath(p) + _SEP for p in (paths.get("stdlib"), paths.get("platstdlib")) if p}
        )
        torch_dir = _dir_of(torch.__file__) or ""
        self._tensor_str = os.path.join(torch_dir, "_tensor_str.py")
        # CPU-side bookkeeping that stays on the CPU on a Mac too (Adam's step counters,
        # samplers' randperm().tolist()): never a predicted sync
        self._distributions = os.path.join(torch_dir, "distributions") + _SEP
        self._internal = tuple(os.path.join(torch_dir, d) + _SEP for d in ("optim", os.path.join("utils", "data")))
        # ... except optimizers whose state lives on the parameters' device: LBFGS's
        # .item() / float() / tensor conditions (hundreds per step) are device syncs, made
        # by the optimizer, not by the user's `opt.step(closure)` line
        self._device_optim = (os.path.join(torch_dir, "optim", "lbfgs.py"),)
        # torch code whose float64 a Mac never runs: GradScaler.unscale_ takes the reciprocal
        # of its scale in float64 on every device but MPS, where it stays float32
        # (torch/amp/grad_scaler.py: `.double().reciprocal().float() if ... != mps else`)
        self._f64_not_on_mps = (os.path.join(torch_dir, "amp", "grad_scaler.py"),)
        # the frames between an op's caller and the recorder: this package, Dynamo's
        # disable wrapper around the mode, OpOverload.__call__ (new for every op)
        self._machinery = (OWN_DIR, os.path.join(torch_dir, "_dynamo", "eval_frame.py"),
                           os.path.join(torch_dir, "_ops.py"))  # fmt: skip
        self._kind: dict[CodeType, int] = {}
        """0 skip, 1 library, 2 user, 3 skip + internal (data loading), 4 device optimizer,
        5 skip + the dispatch machinery (0 everywhere but in the kept-frame cache), 6 skip +
        internal, torch.optim (3 everywhere but in :meth:`leak_site`)."""
        self._last_frame: Any = None
        self._last_user: object = _UNSET  # user_site's answer for _last_frame
        self._last_find: object = _UNSET  # find's answer for _last_frame
        self._last_site: object = _UNSET  # site's answer for _last_frame

    def _classify(self, filename: str) -> int:
        if filename.startswith("<"):
            return 2 if filename in ("<stdin>", "<string>") or filename.startswith("<ipython") else 0
        path = os.path.abspath(filename)
        if path.startswith(self._machinery):
            return 5
        if path in self._device_optim:
            return 4
        if path.startswith(self._distributions):
            return 1  # torch.distributions' argument checks: named as the sync's way (``via``)
        if path.startswith(self._internal):
            return 6 if path.startswith(self._internal[0]) else 3
        if path.startswith(self._skip):
            return 0
        library = "site-packages" in path or "dist-packages" in path
        if not library and path.startswith(self._stdlib):
            return 0
        return 1 if library else 2

    def _caller(self, depth: int) -> tuple[Any, int]:
        """The op's caller: the first frame from ``depth`` on that is not the dispatch
        machinery (None when there is none), with its kind."""
        try:
            frame: Any = sys._getframe(depth + 1)
        except ValueError:
            return None, 0
        return self._first_not(frame, (5,))

    def _first_not(self, frame: Any, skipped: tuple[int, ...]) -> tuple[Any, int]:
        """The first frame from ``frame`` outwards whose kind is not one of ``skipped``, with
        its kind ((None, 0) when there is none)."""
        kinds = self._kind
        while frame is not None:
            code = frame.f_code
            kind = kinds.get(code)
            if kind is None:
                kind = kinds[code] = self._classify(code.co_filename)
            if kind not in skipped:
                return frame, kind
            frame = frame.f_back
        return None, 0

    def _keep(self, frame: Any) -> None:
        """Make ``frame`` the one whose answers are kept (see :meth:`user_site`)."""
        if frame is not self._last_frame:
            self._last_frame = frame if not frame.f_code.co_flags & _RESUMABLE else None
            self._last_user = self._last_find = self._last_site = _UNSET

    def find(self, depth: int = 2) -> tuple[Site | None, bool, bool, Via | None]:
        """(user site, whether the call comes from tensor printing, whether it comes from
        torch's own CPU-side bookkeeping: optimizers, data loading, the innermost library
        frame below the user site or None). A call made by an optimizer that keeps its
        state on the device (LBFGS) is that optimizer's line. The library frame is where a
        framework made the call on the user's behalf (a Trainer's loss check inside
        ``trainer.train()``): the setting that stops it is the framework's, not the line's.

        Kept with the caller's frame, as :meth:`user_site` explains, when the caller is
        torch's code (kinds 0 and 3): the answer then does not depend on its line."""
        frame, kind = self._caller(depth)
        if frame is None:
            return None, False, False, None
        if kind == 0 or kind == 3 or kind == 6:
            if frame is self._last_frame and self._last_find is not _UNSET:
                return self._last_find  # type: ignore[return-value]
            found = self._find_from(frame, True)
            self._keep(frame)
            if frame is self._last_frame:
                self._last_find = found
            return found
        return self._find_from(frame, True)

    def site(self, depth: int = 2) -> Site | None:
        """``find(depth)[0]``, without asking whether the DataLoader made the call (a walk
        to the top of the stack, for every new (op, module) of a sampled step)."""
        frame, kind = self._caller(depth)
        if frame is None:
            return None
        if kind == 0 or kind == 3 or kind == 6:
            if frame is self._last_frame:
                if self._last_site is not _UNSET:
                    return self._last_site  # type: ignore[return-value]
                if self._last_find is not _UNSET:
                    found: tuple[Site | None, bool, bool, Via | None] = self._last_find  # type: ignore[assignment]
                    return found[0]
            site = self._find_from(frame, False)[0]
            self._keep(frame)
            if frame is self._last_frame:
                self._last_site = site
            return site
        return self._find_from(frame, False)[0]

    def _find_from(self, frame: Any, loader: bool) -> tuple[Site | None, bool, bool, Via | None]:
        kinds = self._kind
        via: Via | None = None  # the innermost library frame (a site of its own where no user frame is above it)
        optimizer: Site | None = None
        printing = internal = False
        while frame is not None:
            code = frame.f_code
            kind = kinds.get(code)
            if kind is None:
                kind = kinds[code] = self._classify(code.co_filename)
            if kind == 2:
                if optimizer is not None:
                    return optimizer, printing, False, None
                # the user's code; still look outward: a Dataset's __getitem__ runs inside
                # the DataLoader, on CPU tensors that stay on the CPU on a Mac too
                site = (code.co_filename, frame.f_lineno)
                return site, printing, internal or (loader and self._called_by_loader(frame.f_back)), via
            if kind == 4 and optimizer is None and not internal:
                optimizer = (code.co_filename, frame.f_lineno)
            elif kind == 1 and via is None:
                via = (code.co_filename, frame.f_lineno, code.co_name)
            elif kind == 3 or kind == 6:
                internal = True
            elif kind == 0 and code.co_filename == self._tensor_str:
                printing = True
            frame = frame.f_back
        if optimizer is not None:
            return optimizer, printing, False, None
        return (via[0], via[1]) if via is not None else None, printing, internal, None

    def f64_not_on_mps(self, depth: int = 2) -> bool:
        """Whether the op's caller is torch code that makes float64 only off MPS (see
        ``_f64_not_on_mps``): a Mac runs a float32 branch there, so it is no float64 op of
        the script's to report."""
        frame, _ = self._caller(depth)
        return frame is not None and os.path.abspath(frame.f_code.co_filename) in self._f64_not_on_mps

    def owner(self, site: Site | None) -> str | None:
        """The optimizer that made a call at ``site`` (a line of torch.optim.LBFGS), else None."""
        if site is not None and site[0] in self._device_optim:
            return "torch.optim.LBFGS.step"
        return None

    def user_site(self, depth: int = 2) -> Site | None:
        """The innermost user frame's (file, line), or None: :meth:`find` without the
        printing and data-loading questions (leak tracking asks for every loop-level op).

        The walk starts at the op's caller (the first frame past the dispatch machinery).
        A caller that is the user's code is the answer; any other caller (an optimizer's
        ``_single_tensor_adam``, ``F.linear``) is called from the same frames for as long
        as it runs (a generator is not: it is never kept), so the answer found above it
        holds for every op it makes: it is kept with the frame itself (a strong reference,
        so no other frame can take its place; :meth:`forget` drops it at the end of a
        sampled step)."""
        return self._user_of(*self._caller(depth))

    def _user_of(self, frame: Any, kind: int) -> Site | None:
        if frame is None:
            return None
        if kind == 2:
            return frame.f_code.co_filename, frame.f_lineno
        if frame is self._last_frame and self._last_user is not _UNSET:
            return self._last_user  # type: ignore[return-value]
        site = self._walk_user(frame.f_back)
        self._keep(frame)
        if frame is self._last_frame:
            self._last_user = site
        return site

    def leak_site(self, depth: int = 2) -> tuple[bool, Site | None]:
        """(whether torch.optim's own code made the call, :meth:`user_site`): what an
        optimizer's step makes (its temporaries, its state) is not the script's to keep.
        LBFGS (kind 4) included: its history (``old_dirs``, ``old_stps``: up to
        ``history_size`` tensors in ``optimizer.state``, torch/optim/lbfgs.py) grows step
        after step on the parameters' device, and was taken for the script's
        ``opt.step(closure)`` line piling tensors up (on CUDA; a CPU run does not follow
        them). The closure's own ops are the script's: their caller is the closure."""
        frame, kind = self._caller(depth)
        if kind == 6 or kind == 4:
            return True, None
        if kind == 0 and frame is not None and self._optimizer_above(frame):
            return True, None
        return False, self._user_of(frame, kind)

    def _optimizer_above(self, frame: Any) -> bool:
        """Whether torch's own Python between an op and its caller (``Tensor.__rtruediv__``
        in torch/_tensor.py, for LBFGS's ``ro.append(1.0 / ys)``) was called by an
        optimizer: the first frame above that is not skipped code is torch.optim's. LBFGS's
        curvature history (``ro``, up to ``history_size`` 0-d tensors in
        ``optimizer.state``, torch/optim/lbfgs.py) was "one small tensor kept per step" at
        the script's ``opt.step(closure)`` line on the CPU. Sampled steps only, and only
        for ops not made in a module (:class:`~.ops_leaks` asks for those)."""
        kind = self._first_not(frame.f_back, (0, 5))[1]
        return kind == 6 or kind == 4

    def forget(self) -> None:
        """Drop the kept frame (its locals would outlive the sampled step)."""
        self._last_frame = None
        self._last_user = self._last_find = self._last_site = _UNSET

    def _walk_user(self, frame: Any) -> Site | None:
        kinds = self._kind
        while frame is not None:
            code = frame.f_code
            kind = kinds.get(code)
            if kind is None:
                kind = kinds[code] = self._classify(code.co_filename)
            if kind == 2:
                return code.co_filename, frame.f_lineno
            frame = frame.f_back
        return None

    def is_user(self, code: CodeType) -> bool:
        """Whether a code object is the user's own (not torch, a library or the stdlib)."""
        kind = self._kind.get(code)
        if kind is None:
            kind = self._kind[code] = self._classify(code.co_filename)
        return kind == 2

    def _called_by_loader(self, frame: Any, limit: int = 40) -> bool:
        kinds = self._kind
        while frame is not None and limit > 0:
            code = frame.f_code
            kind = kinds.get(code)
            if kind is None:
                kind = kinds[code] = self._classify(code.co_filename)
            if kind == 3 or kind == 6:
                return True
            frame = frame.f_back
            limit -= 1
        return False


def source_line(site: Site | None) -> str:
    """The stripped source text of a site ('' when unavailable), cut to 160 characters."""
    if site is None:
        return ""
    try:
        return linecache.getline(site[0], site[1]).strip()[:160]
    except Exception:
        return ""


STATEMENT_LINES = 6
STATEMENT_CHARS = 240


def statement_text(file: str, line: int) -> str:
    """The source of the statement that starts at ``file:line``, its lines joined: up to
    where its brackets close (``if (`` ... ``):`` of a condition written over several
    lines), at most ``STATEMENT_LINES`` lines and ``STATEMENT_CHARS`` characters; '' when
    the source cannot be read. What the diagnosis matches a framework's own call by."""
    parts: list[str] = []
    depth = 0
    try:
        for n in range(line, line + STATEMENT_LINES):
            text = linecache.getline(file, n).strip()
            if not text and n == line:
                return ""
            parts.append(text)
            depth += sum(text.count(c) for c in "([{") - sum(text.count(c) for c in ")]}")
            if depth <= 0:
                break
    except Exception:
        return ""
    return " ".join(parts)[:STATEMENT_CHARS]


SCALAR_OP = "aten::_local_scalar_dense"
COPY_OPS = frozenset({"aten::_to_copy", "aten::copy_", "aten::to.device", "aten::to.dtype_layout"})
DYNAMIC_SHAPE_OPS = {
    "aten::nonzero": "nonzero",
    "aten::masked_select": "nonzero",
    "aten::_unique2": "unique",
    "aten::unique_dim": "unique",
    "aten::unique_consecutive": "unique",
    "aten::equal": "equal",
    "aten::repeat_interleave.Tensor": "nonzero",
}
"""Ops whose result size or value the host must read back before it can go on."""


def static_sync_kind(op: str) -> str | None:
    """The sync kind an op always has, whatever its devices (None: maybe a copy)."""
    if op == SCALAR_OP:
        return "item"
    return DYNAMIC_SHAPE_OPS.get(op)


def scalar_kind(code: str) -> str:
    """``.item()`` when the line says so; otherwise an implicit conversion (float(t), if t)."""
    return "item" if ".item(" in code else "scalar"


class TensorPatches:
    """Wraps ``Tensor.tolist`` / ``Tensor.cpu`` / ``Tensor.__repr__`` while installed.

    ``on_call(kind, tensor)`` runs before the original, on the installing thread only,
    and must not raise (it is guarded anyway). While a wrapped call runs, ``active``
    names its kind so the dispatch mode does not count its inner copy a second time.
    """

    NAMES = (("tolist", "tolist"), ("cpu", "to_cpu"), ("__repr__", "print"))

    def __init__(self, on_call: Callable[[str, torch.Tensor], None]) -> None:
        self._on_call = on_call
        self._saved: dict[str, tuple[bool, Any]] = {}
        self._thread = 0
        self.active: str | None = None

    def install(self) -> None:
        if self._saved:
            return
        self._thread = threading.get_ident()
        cls = torch.Tensor
        for name, kind in self.NAMES:
            own = name in cls.__dict__
            original = getattr(cls, name)
            self._saved[name] = (own, cls.__dict__.get(name))
            setattr(cls, name, self._wrap(original, kind))

    def remove(self) -> None:
        cls = torch.Tensor
        for name, (own, value) in self._saved.items():
            try:
                if own:
                    setattr(cls, name, value)
                elif name in cls.__dict__:
                    delattr(cls, name)
            except Exception:
                pass
        self._saved.clear()
        self.active = None

    def _wrap(self, original: Callable[..., Any], kind: str) -> Callable[..., Any]:
        patches = self

        @functools.wraps(original)
        def wrapper(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if patches.active is not None or threading.get_ident() != patches._thread:
                return original(self, *args, **kwargs)
            try:
                patches._on_call(kind, self)
            except Exception:
                pass
            patches.active = kind
            try:
                return original(self, *args, **kwargs)
            finally:
                patches.active = None

        return hide_from_warnings(wrapper)  # torch's warnings keep naming the user's line
