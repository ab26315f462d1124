"""probe/plain_frames.py: the traceback of a forward that crashed under a global module
hook of ours reads as plain python's (torch/nn/modules/module.py ``Module._call_impl``:
any global hook takes its slow path through ``inner()``)."""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType

import torch
from torch import nn
from torch.nn.modules.module import register_module_forward_pre_hook

from mpsprofiler.probe.plain_frames import fast_path


def _hook(module: nn.Module, args: object) -> None:
    return None


def _crash(model: nn.Module) -> TracebackType:
    try:
        model(torch.randn(2, 5))
    except RuntimeError as exc:
        assert exc.__traceback__ is not None
        return exc.__traceback__
    raise AssertionError("no crash")


def _entries(tb: TracebackType | None) -> list[TracebackType]:
    out = []
    while tb is not None:
        out.append(tb)
        tb = tb.tb_next
    return out


def _format(entries: list[TracebackType]) -> list[str]:
    for here, after in zip(entries, entries[1:], strict=False):
        here.tb_next = after
    entries[-1].tb_next = None
    return traceback.format_tb(entries[0])


@contextmanager
def _global_hook() -> Iterator[None]:
    handle = register_module_forward_pre_hook(_hook)
    try:
        yield
    finally:
        handle.remove()


def _ours(name: str) -> bool:
    return name == _hook.__code__.co_filename


def test_a_crash_under_our_global_hook_reads_as_without_it() -> None:
    model = nn.Sequential(nn.Linear(4, 3))
    plain = _format(_entries(_crash(model)))
    with _global_hook():
        hooked = _entries(_crash(model))
        trimmed = fast_path(hooked, _ours)
    assert any(e.tb_frame.f_code.co_name == "inner" for e in hooked)  # torch's slow path
    assert _format(trimmed) == plain


def test_a_hook_of_someone_else_s_or_of_the_module_keeps_the_slow_path() -> None:
    model = nn.Sequential(nn.Linear(4, 3))
    with _global_hook():
        hooked = _entries(_crash(model))
        assert fast_path(hooked, lambda name: False) == hooked  # the global hook is the user's
        handle = model.register_forward_hook(lambda module, args, out: None)
        try:
            kept = fast_path(_entries(_crash(model)), _ours)
        finally:
            handle.remove()
    # the outer module has a hook of its own: python takes the slow path there too
    assert [e.tb_frame.f_code.co_name for e in kept].count("inner") == 1
