"""The op sampler's dispatch mode runs higher-order operators untouched (probe/ops_mode.py).

Inductor's code for a checkpointed block (and AOT Autograd's for any backend) calls
``run_and_save_rng_state``; ``flex_attention`` and ``cond`` are others. A mode torch does
not know handles them makes torch raise in the user's step. torch 2.9+ reads the mode's
``supports_higher_order_operators``; older releases read only a handler registered with
each operator for the mode's type, which ``pass_higher_order_operators`` provides (run here
on the installed torch with its flag hidden: the registered handler wins there too).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from mpsprofiler.probe import ops_mode
from mpsprofiler.probe.ops_mode import OpMode, pass_higher_order_operators

HOP = getattr(getattr(torch.ops, "higher_order", None), "run_and_save_rng_state", None)
pytestmark = pytest.mark.skipif(not isinstance(HOP, ops_mode.HigherOrderOperator),
                                reason="this torch has no run_and_save_rng_state operator")


class Accountant:
    """What OpMode reads and calls on the op accountant, recording the ops it is given."""

    def __init__(self) -> None:
        self._recording = True
        self._clock = time.perf_counter
        self._bookkeeping = 0.0
        self.ops: list[str] = []

    def _record(self, func: Any, args: Any, kwargs: dict[str, Any], out: Any, dt: float) -> None:
        self.ops.append(str(func))

    def _fail(self, exc: BaseException) -> None:
        raise AssertionError(f"the mode failed: {exc!r}")


def _run_hop(acct: Accountant) -> torch.Tensor:
    x = torch.ones(3)
    with OpMode(acct):
        y = x * 2  # an ordinary op, recorded
        _, out = HOP(torch.ops.aten.mul.Tensor, y, y)
    return out


def test_a_higher_order_operator_runs_as_without_the_mode() -> None:
    if getattr(TorchDispatchMode, "supports_higher_order_operators", None) is None:
        pytest.skip("this torch reads no flag (before 2.9): see the registration test")
    acct = Accountant()
    out = _run_hop(acct)
    assert torch.equal(out, torch.full((3,), 4.0))
    assert acct.ops == ["aten.mul.Tensor"], acct.ops  # the operator's own ops go unrecorded


def test_on_a_torch_without_the_flag_the_mode_is_registered_with_each_operator(monkeypatch: Any) -> None:
    table = torch._ops._higher_order_ops
    if hasattr(TorchDispatchMode, "supports_higher_order_operators"):
        # the installed torch as one before 2.9: no flag on modes
        monkeypatch.delattr(TorchDispatchMode, "supports_higher_order_operators")
        monkeypatch.setattr(OpMode, "supports_higher_order_operators", False)
    done: set[str] = set()
    try:
        with pytest.raises(Exception, match="run_and_save_rng_state"):
            _run_hop(Accountant())  # what a user's step met
        pass_higher_order_operators(done)
        assert "run_and_save_rng_state" in done and len(done) == len(table)
        acct = Accountant()
        assert torch.equal(_run_hop(acct), torch.full((3,), 4.0))
        assert acct.ops == ["aten.mul.Tensor"], acct.ops
    finally:
        for name in done:
            keys = getattr(table[name], "python_key_table", None)
            if keys is not None and keys.pop(OpMode, None) is not None:
                table[name]._dispatch_cache.clear()
