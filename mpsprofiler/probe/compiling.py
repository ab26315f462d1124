"""Keep the probe invisible to ``torch.compile`` (TorchDynamo).

Dynamo traces ``nn.Module.__call__`` with everything it finds there: a global module hook
(``register_module_forward_pre_hook``) is inlined into the graph, its closure and handle
become variables Dynamo must represent (``fullgraph=True`` then fails with ``Unsupported
... RemovableHandle`` or ``... already tracked for mutation``), Dynamo guards on the hook
dicts (installing or removing a hook later forces a recompile), and
``OptimizedModule.__call__`` warns about global hooks on every compiled model. See
torch/_dynamo/eval_frame.py (``OptimizedModule.__call__``), torch/_dynamo/convert_frame.py
and torch/_dynamo/variables/nn_module.py, which all read
``torch.nn.modules.module._global_forward_pre_hooks`` and friends.

So the probe's global module hooks (the one-shot start-of-step-0 marker and the op
sampler's module tracker) must be gone before Dynamo first looks, and never come back.
No flag of torch says "this script will compile" ahead of time, and the signals that
exist come too late or are unreliable: ``torch._dynamo`` is imported by any
``optimizer.step()`` of torch >= 2.2, and Dynamo's frame counters stay at zero for
``fullgraph=True`` models in torch 2.13. The one reliable point is the public entry
``torch.compile`` itself (``nn.Module.compile`` and ``@torch.compile`` decorators call it
too): it always runs eagerly, before any tracing, so :class:`CompileWatch` wraps it and
tells its listeners once. The wrapper is a pass-through hidden from warnings' stacklevel
(see ``transparent``). Other Dynamo entries (``torch._dynamo.optimize``, ``torch.export``)
are covered by :func:`dynamo_used`, checked before every install, and by
:func:`is_compiling` at the top of every hook, which makes a hook Dynamo does reach a
no-op it can trace.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

from .transparent import hide_from_warnings

_IS_COMPILING: Callable[[], bool] | None = None


def _resolve_is_compiling() -> Callable[[], bool] | None:
    """torch.compiler.is_compiling (torch >= 2.3), else torch._dynamo.is_compiling (2.1, 2.2);
    Dynamo folds both to True while it traces."""
    torch = sys.modules.get("torch")
    fn = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    if fn is None:
        fn = getattr(sys.modules.get("torch._dynamo"), "is_compiling", None)
    return fn if callable(fn) else None


def is_compiling() -> bool:
    """Whether Dynamo is tracing the caller right now (False when it cannot be)."""
    global _IS_COMPILING
    fn = _IS_COMPILING
    if fn is None:
        if "torch._dynamo" not in sys.modules:
            return False  # nothing can be tracing yet
        fn = _IS_COMPILING = _resolve_is_compiling()
        if fn is None:
            return False
    try:
        return bool(fn())
    except Exception:
        return False


def fast_is_compiling() -> Callable[[], bool]:
    """The cheapest answer to :func:`is_compiling` for hooks that run at every step:
    ``torch.compiler.is_compiling`` itself where torch has it (2.3+; Dynamo folds it to
    True while it traces, and no frame of the probe's comes between), else
    :func:`is_compiling`. Resolved once, when the hook is installed (torch is imported)."""
    torch = sys.modules.get("torch")
    fn = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    return fn if callable(fn) else is_compiling


EAGER_FLAG_NAMES = frozenset({"torch", "jit", "is_scripting", "_is_compiling_flag"})
"""Every global name ``torch.compiler.is_compiling`` may read for :func:`eager_is_compiling`
to read its flag instead: the function is then ``False if torch.jit.is_scripting() else
_is_compiling_flag``, nothing more."""


def eager_is_compiling() -> Callable[[], bool]:
    """:func:`fast_is_compiling` for code Dynamo never traces (the backward wrapper, whose
    code is marked SKIP, see ``backward._hide_from_dynamo``): one C call, no Python frame.

    ``torch.compiler.is_compiling`` (torch/compiler/__init__.py) returns the module global
    ``_is_compiling_flag`` unless TorchScript is scripting the caller, which eager Python
    never is; ``torch.compile`` holds the flag True for its whole compile session
    (torch/_dynamo/convert_frame.py, ``compile_inner`` enters ``_compile_session_context``:
    AOT autograd's joint pass runs then) and ``torch.export`` for its tracing
    (torch/_export/utils.py). Where the installed torch's function reads nothing but that
    flag (its code's global names, checked here, not assumed of a release), reading the
    flag is the same answer: ``functools.partial(getattr, torch.compiler, name)``. Never
    for a hook Dynamo may inline (the optimizer hooks): there the call must stay a call
    Dynamo folds, a global read would be guarded on."""
    compiler = getattr(sys.modules.get("torch"), "compiler", None)
    fn = getattr(compiler, "is_compiling", None)
    names = getattr(getattr(fn, "__code__", None), "co_names", None)
    if names is not None and "_is_compiling_flag" in names and set(names) <= EAGER_FLAG_NAMES \
            and isinstance(getattr(compiler, "_is_compiling_flag", None), bool):
        return functools.partial(getattr, compiler, "_is_compiling_flag")
    return fast_is_compiling()


def dynamo_used() -> bool:
    """Whether Dynamo has compiled a frame in this process (a net for entries other than
    ``torch.compile``; ``fullgraph=True`` compilations may not be counted)."""
    if "torch._dynamo" not in sys.modules:
        return False
    try:
        from torch._dynamo.utils import counters

        return bool(counters["frames"]["ok"])
    except Exception:
        return True  # cannot tell: assume it was, hooks stay off


class CompileWatch:
    """Calls its listeners once, when ``torch.compile`` is first called, and its
    ``after`` listeners when that first call has returned (``torch.compile`` imports
    Dynamo, seconds that belong to no step)."""

    def __init__(self, on_error: Callable[[BaseException], None]) -> None:
        self.in_use = False
        self.listeners: list[Callable[[], None]] = []
        self.after: list[Callable[[], None]] = []
        self._on_error = on_error

    def install(self) -> Callable[[], None]:
        """Wrap ``torch.compile``; returns the uninstaller."""
        import torch

        original = getattr(torch, "compile", None)
        if original is None:  # torch < 2.0: nothing to watch
            return lambda: None
        notify = self.notify
        done = self._done

        def compile(*args: Any, **kwargs: Any) -> Any:
            first = notify()
            result = original(*args, **kwargs)
            if first:
                done()
            return result

        wrapper = functools.wraps(original)(hide_from_warnings(compile))
        torch.compile = wrapper

        def uninstall() -> None:
            if getattr(torch, "compile", None) is wrapper:
                torch.compile = original

        return uninstall

    def notify(self) -> bool:
        """torch.compile is in use: tell the listeners (once; True that time); never raises."""
        if self.in_use:
            return False
        self.in_use = True
        self._call(self.listeners)
        return True

    def _done(self) -> None:
        self._call(self.after)

    def _call(self, listeners: list[Callable[[], None]]) -> None:
        for listener in listeners:
            try:
                listener()
            except Exception as exc:
                try:
                    self._on_error(exc)
                except Exception:
                    pass
