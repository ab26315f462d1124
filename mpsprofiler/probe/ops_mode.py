"""The op sampler's dispatch mode: the code that runs inside every op of a sampled step.

Split from the accountant (``probe/ops.py``), which decides which steps are sampled and
builds the ``ops`` event; this module holds only the mode itself and its one concern with
Dynamo. The mode observes each op (``return func(*args, **kwargs)``, never anything else)
and hands it to its recorder; it reports ``ignore_compile_internals()`` so
``torch.compile`` behaves as if it were absent. While recording, a copy op (one of
``copy_timer.ops``) is also handed to the host-to-device copy timer (probe/copies.py
``CopyTimer``) before and after it runs: on CUDA two events around the copy.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, ClassVar, Protocol

import torch._ops
from torch.utils._python_dispatch import TorchDispatchMode

HigherOrderOperator: Any = getattr(torch._ops, "HigherOrderOperator", ())
"""Operators of operators (torch 2.1+; ``()`` matches nothing where the class is missing)."""


class OpRecorder(Protocol):
    """What the mode reads and calls on the accountant (``ops.OpAccountant``)."""

    _recording: bool
    _clock: Callable[[], float]
    _bookkeeping: float

    def _record(self, func: Any, args: Any, kwargs: dict[str, Any], out: Any, dt: float) -> None: ...

    def _fail(self, exc: BaseException) -> None: ...


class CopyWatch(Protocol):
    """What the mode calls on the copy timer (``copies.CopyTimer``)."""

    ops: frozenset[Any]

    def start(self, func: Any, args: Any, kwargs: dict[str, Any]) -> Any: ...

    def end(self, mark: Any) -> None: ...


class OpMode(TorchDispatchMode):
    """Times each op and hands it to the accountant; returns exactly what ``func`` returns."""

    supports_higher_order_operators = True
    """Higher-order operators (``run_and_save_rng_state`` in inductor's code for a
    checkpointed block, ``flex_attention``, ``cond``...) come to ``__torch_dispatch__``,
    which runs them untouched. Without it torch raises in the user's step ("There was no
    rule registered for HigherOrderOperator ... and mode", ``HigherOrderOperator.dispatch``
    in torch/_ops.py; the flag is pytorch/pytorch#158077, torch 2.9). Older releases have no
    flag: :func:`pass_higher_order_operators` registers the mode with each operator."""

    copy_timer: ClassVar[CopyWatch | None] = None
    """Set by the probe: host-to-device copies of sampled steps go through it (its
    ``start`` and ``end`` never raise). Its ``start`` runs outside the op's timed span and
    the bookkeeping; ``end`` (one event record) counts as bookkeeping."""

    def __init__(self, accountant: OpRecorder) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # unannotated in torch
        self._acct = accountant

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        return True

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """False: torch (2.6+) would wrap ``__torch_dispatch__`` in ``torch._disable_dynamo``,
        whose first call imports ``torch._dynamo`` (~3 s, and far more memory) in scripts
        that never use it, inside a sampled step. ``shield_from_dynamo`` does the same
        wrapping once Dynamo is already loaded, the only time it can trace anything."""
        return False

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        acct = self._acct
        if not acct._recording or isinstance(func, HigherOrderOperator):
            # an operator of operators: torch has taken the mode off the stack for this
            # call, so it runs as it would without it (the ops inside it go unrecorded)
            return func(*args, **kwargs)
        clock = acct._clock
        timer = self.copy_timer
        mark = timer.start(func, args, kwargs) if timer is not None and func in timer.ops else None
        t0 = clock()
        out = func(*args, **kwargs)
        t1 = clock()
        if mark is not None and timer is not None:
            timer.end(mark)
        try:
            acct._record(func, args, kwargs, out, t1 - t0)
        except Exception as exc:
            acct._fail(exc)
        acct._bookkeeping += clock() - t1
        return out


_RAW_DISPATCH = OpMode.__torch_dispatch__


def shield_from_dynamo() -> None:
    """Make Dynamo skip the mode's ``__torch_dispatch__`` (as torch does for every mode),
    but only once ``torch._dynamo`` is imported: before that nothing can trace it, and
    importing it ourselves would cost the script seconds it never pays under python."""
    if OpMode.__torch_dispatch__ is not _RAW_DISPATCH:
        return
    dynamo = sys.modules.get("torch._dynamo")
    disable = getattr(dynamo, "disable", None)
    if disable is None:
        return
    try:
        OpMode.__torch_dispatch__ = disable(_RAW_DISPATCH, recursive=True)  # type: ignore[method-assign]
    except Exception:
        pass  # an unusual torch: the mode stays unwrapped, as before torch 2.6


def pass_higher_order_operators(registered: set[str]) -> None:
    """On a torch without the opt-in flag (before 2.9), register the mode with each
    higher-order operator that exists so far (``torch._ops._higher_order_ops``, name ->
    operator), to run it without the mode: ``HigherOrderOperator.py_impl`` with a mode
    class fills the operator's table of handlers by mode type, which its Python-key
    dispatch reads first (torch/_ops.py). Torch 2.2+ calls the handler with the mode
    popped and handed first (pytorch/pytorch#109157); 2.1 calls it with the mode still on
    the stack, so the handler pops it. ``registered`` holds the names done; called at every
    sampled step's start (operators are made as their modules are imported)."""
    if getattr(TorchDispatchMode, "supports_higher_order_operators", None) is not None:
        return  # the flag is read instead (torch 2.9+)
    import torch._ops as ops

    table = getattr(ops, "_higher_order_ops", None)
    if not isinstance(table, dict) or len(table) == len(registered):
        return
    for name, hop in list(table.items()):
        if name in registered:
            continue
        registered.add(name)
        try:
            hop.py_impl(OpMode)(_passthrough(hop))
        except Exception:
            pass  # an operator that takes no handlers: as before


def _passthrough(hop: Any) -> Callable[..., Any]:
    from torch.utils._python_dispatch import _pop_mode_temporarily

    def run(*args: Any, **kwargs: Any) -> Any:
        if args and isinstance(args[0], OpMode):  # popped by torch and handed first
            return hop(*args[1:], **kwargs)
        with _pop_mode_temporarily():
            return hop(*args, **kwargs)

    return run
