"""Traceback entries inside torch that only mpsprof's instruments put there.

The traceback a crashed script prints at exit must be python's, byte for byte (and the
crash excerpt of the recording shows the same frames). Two instruments change torch's
own path, not only add frames of ours (``boot._trim`` drops those):

* Any global module hook sends ``Module._call_impl`` (torch/nn/modules/module.py) down
  its slow path, which runs the forward through a nested ``inner()``: the traceback
  shows ``_call_impl`` at ``return inner()`` and then ``inner`` at
  ``result = forward_call(*args, **kwargs)``. Plain python takes the fast path, one
  entry: ``_call_impl`` at ``return forward_call(*args, **kwargs)``. The probe's start
  marker hooks the first forward of the run (``step_hooks.start_marker``) and the module
  tracker every forward of a sampled step (``modules.ModuleTracker``). Where neither the
  module nor a global hook of someone else's would have taken the slow path, the
  ``inner`` entry goes and the ``_call_impl`` entry is pointed at the fast path's call
  (a new entry for the same frame: same locals, python's line and columns).
* On a sampled step the op accounting's ``__torch_dispatch__`` (ours) runs each op
  again through ``OpOverload.__call__`` (torch/_ops.py), which torch wraps in Dynamo's
  disable wrapper (torch/_dynamo/eval_frame.py ``_fn``), and torch 2.6+ wraps the
  mode's ``__torch_dispatch__`` itself the same way (``ops_mode``): the entries of those
  files right after an entry of ours, or right around the mode's method, are not in
  python's traceback.

Nothing here may fail the crash report: any surprise leaves the entries as they were.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from types import CodeType, TracebackType
from typing import Any

_MODULE_PY = os.path.join("torch", "nn", "modules", "module.py")
_DISPATCH_FILES = tuple(os.path.join("torch", *parts) for parts in (
    ("_ops.py",), ("_dynamo", "eval_frame.py"), ("utils", "_python_dispatch.py")))
_FAST_CALL = "return forward_call(*args, **kwargs)"
"""The fast path's line in ``Module._call_impl`` (torch 1.13 to 2.13 at least)."""
_GLOBAL_HOOKS = ("_global_forward_pre_hooks", "_global_forward_hooks",
                 "_global_backward_pre_hooks", "_global_backward_hooks")
_OWN_HOOKS = ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks")

_fast_calls: dict[CodeType, tuple[int, int] | None] = {}


def dispatch_entries(entries: list[TracebackType], ours: Callable[[str], bool]) -> set[int]:
    """Indices of torch's dispatch entries entered from an entry of ours (the op
    accounting re-running an op): python's traceback has none of them."""
    out: set[int] = set()
    after_ours = False
    for i, entry in enumerate(entries):
        name = entry.tb_frame.f_code.co_filename
        if ours(name):
            after_ours = True
        elif after_ours and name.endswith(_DISPATCH_FILES):
            out.add(i)
        else:
            after_ours = False
        after = entries[i + 1].tb_frame.f_code if i + 1 < len(entries) else None
        if name.endswith(_DISPATCH_FILES) and after is not None and after.co_name == "__torch_dispatch__" \
                and ours(after.co_filename):
            out.add(i)  # Dynamo's disable wrapper around the mode's own method
    return out


def fast_path(entries: list[TracebackType], ours: Callable[[str], bool]) -> list[TracebackType]:
    """``entries`` with each hook-made ``_call_impl`` + ``inner`` pair replaced by the one
    entry python's fast path gives, where only our hooks made the slow path."""
    out: list[TracebackType] = []
    skip = False
    for i, entry in enumerate(entries):
        if skip:
            skip = False
            continue
        after = entries[i + 1] if i + 1 < len(entries) else None
        plain = _plain_call(entry, after, ours) if after is not None else None
        if plain is not None:
            out.append(plain)
            skip = True
        else:
            out.append(entry)
    return out


def _plain_call(entry: TracebackType, after: TracebackType, ours: Callable[[str], bool]) -> TracebackType | None:
    frame, code = entry.tb_frame, entry.tb_frame.f_code
    if code.co_name != "_call_impl" or after.tb_frame.f_code.co_name != "inner" \
            or after.tb_frame.f_back is not frame or not code.co_filename.endswith(_MODULE_PY) \
            or not after.tb_frame.f_code.co_filename.endswith(_MODULE_PY):
        return None
    try:
        if _slow_anyway(frame.f_locals.get("self"), ours):
            return None
        where = _fast_call(code)
        if where is None:
            return None
        return TracebackType(None, frame, where[0], where[1])
    except Exception:
        return None


def _slow_anyway(module: Any, ours: Callable[[str], bool]) -> bool:
    """Whether plain python would have taken the slow path too: the module has hooks of
    its own, or a global hook is someone else's (``Module._call_impl``'s condition)."""
    if module is None or any(getattr(module, name, None) for name in _OWN_HOOKS):
        return True
    torch_module = sys.modules.get("torch.nn.modules.module")
    for name in _GLOBAL_HOOKS:
        for hook in dict(getattr(torch_module, name, None) or {}).values():
            hook_code = getattr(getattr(hook, "__func__", hook), "__code__", None)
            if hook_code is None or not ours(hook_code.co_filename):
                return True
    return False


def _fast_call(code: CodeType) -> tuple[int, int] | None:
    """(instruction offset, line) of the fast path's forward call in ``_call_impl``."""
    if code not in _fast_calls:
        _fast_calls[code] = _find_fast_call(code)
    return _fast_calls[code]


def _find_fast_call(code: CodeType) -> tuple[int, int] | None:
    import dis
    import linecache

    lines = linecache.getlines(code.co_filename)
    line = None
    for ins in dis.get_instructions(code):
        positions = getattr(ins, "positions", None)  # Python 3.11+
        starts = ins.starts_line if positions is None else positions.lineno
        if isinstance(starts, int) and not isinstance(starts, bool) and starts:
            line = starts
        if ins.opname.startswith("CALL") and line is not None and 0 < line <= len(lines) \
                and lines[line - 1].strip() == _FAST_CALL:
            return ins.offset, line
    return None
