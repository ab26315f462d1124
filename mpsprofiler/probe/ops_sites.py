"""Where in the user's code an op came from, and the syncs a dispatch mode cannot see.

Only used on sampled steps, for the few ops that need a source line (syncs, fallbacks,
float64): walking ``sys._getframe`` with a per-code-object cache costs ~1-2 µs.

``Tensor.tolist``, ``Tensor.cpu`` and printing never reach a ``TorchDispatchMode`` on a
CPU tensor (no op is dispatched; ``torch._tensor_str`` even disables modes), yet each is a
host-device sync on a Mac. :class:`TensorPatches` wraps them during sampled steps only
and calls the original unchanged.
"""

from __future__ import annotations

import functools
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

_SEP = os.sep


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
        self._internal = tuple(os.path.join(torch_dir, d) + _SEP for d in ("optim", os.path.join("utils", "data")))
        # ... except optimizers whose state lives on the parameters' device: LBFGS's
        # .item() / float() / tensor conditions (hundreds per step) are device syncs, made
        # by the optimizer, not by the user's `opt.step(closure)` line
        self._device_optim = (os.path.join(torch_dir, "optim", "lbfgs.py"),)
        self._kind: dict[CodeType, int] = {}  # 0 skip, 1 library, 2 user, 3 skip + internal, 4 device optimizer

    def _classify(self, filename: str) -> int:
        if filename.startswith("<"):
            return 2 if filename in ("<stdin>", "<string>") or filename.startswith("<ipython") else 0
        path = os.path.abspath(filename)
        if path in self._device_optim:
            return 4
        if path.startswith(self._internal):
            return 3
        if path.startswith(self._skip):
            return 0
        library = "site-packages" in path or "dist-packages" in path
        if not library and path.startswith(self._stdlib):
            return 0
        return 1 if library else 2

    def find(self, depth: int = 2) -> tuple[Site | None, bool, bool]:
        """(user site, whether the call comes from tensor printing, whether it comes from
        torch's own CPU-side bookkeeping: optimizers, data loading). A call made by an
        optimizer that keeps its state on the device (LBFGS) is that optimizer's line."""
        try:
            frame: Any = sys._getframe(depth)
        except ValueError:
            return None, False, False
        kinds = self._kind
        library: Site | None = None
        optimizer: Site | None = None
        printing = internal = False
        while frame is not None:
            code = frame.f_code
            kind = kinds.get(code)
            if kind is None:
                kind = kinds[code] = self._classify(code.co_filename)
            if kind == 2:
                if optimizer is not None:
                    return optimizer, printing, False
                # the user's code; still look outward: a Dataset's __getitem__ runs inside
                # the DataLoader, on CPU tensors that stay on the CPU on a Mac too
                site = (code.co_filename, frame.f_lineno)
                return site, printing, internal or self._called_by_loader(frame.f_back)
            if kind == 4 and optimizer is None and not internal:
                optimizer = (code.co_filename, frame.f_lineno)
            elif kind == 1 and library is None:
                library = (code.co_filename, frame.f_lineno)
            elif kind == 3:
                internal = True
            elif kind == 0 and code.co_filename == self._tensor_str:
                printing = True
            frame = frame.f_back
        if optimizer is not None:
            return optimizer, printing, False
        return library, printing, internal

    def owner(self, site: Site | None) -> str | None:
        """The optimizer that made a call at ``site`` (a line of torch.optim.LBFGS), else None."""
        if site is not None and site[0] in self._device_optim:
            return "torch.optim.LBFGS.step"
        return None

    def user_site(self, depth: int = 2) -> Site | None:
        """The innermost user frame's (file, line), or None: :meth:`find` without the
        printing and data-loading questions (leak tracking asks for every loop-level op)."""
        try:
            frame: Any = sys._getframe(depth)
        except ValueError:
            return None
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
            if kind == 3:
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
