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

from torch.utils._python_dispatch import TorchDispatchMode


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
        if not acct._recording:
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
