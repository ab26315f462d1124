"""``leak_owner.replayed``: whether an ``itertools.cycle`` keeps a leaked tensor, in the list
of the first pass it saves and replays (the batch itself, or inside a batch's list, tuple
or dict). Such tensors are bounded, not a pile-up (tests/e2e/test_leaks.py runs it through
the CLI); a tensor a plain list keeps, or one the cycle has not yielded yet, is not."""

from __future__ import annotations

import itertools

import torch

from mpsprofiler.probe.leak_owner import replayed


def test_a_batch_a_cycle_has_yielded_is_replayed() -> None:
    t, u, v = torch.ones(2), torch.ones(3), torch.ones(4)
    batches = itertools.cycle(iter([[t, torch.zeros(1)], {"x": u}, v]))
    for _ in range(3):
        next(batches)
    assert replayed(t) and replayed(u) and replayed(v)


def test_a_tensor_no_cycle_keeps_is_not() -> None:
    t, later = torch.ones(2), torch.ones(3)
    kept = [[t]]
    batches = itertools.cycle(iter([torch.zeros(1), [later]]))
    next(batches)  # `later` is still in the source iterator, not in the saved first pass
    assert not replayed(t) and not replayed(later)
    assert kept and batches
