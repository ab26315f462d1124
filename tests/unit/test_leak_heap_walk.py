"""One heap walk for a leak check's owner searches (probe/leak_owner.py ``Referrers``).

``gc.get_referrers`` walks the whole heap; a check searched each leaking line's owner with
walks of its own, and the four lines of a graph kept by ``total_val += loss`` (no Python
container holds its saved tensors) paused one step of the trigger script for 240 ms. The
shared walk must give each tensor the referrers its own walk gives, in the same order, and
the check must not keep the tensors alive after it."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import torch

from mpsprofiler.probe import leak_owner, ops_leaks
from mpsprofiler.probe.leak_owner import Referrers
from mpsprofiler.probe.ops import OpAccountant


class Holder:
    def __init__(self) -> None:
        self.outs: list[torch.Tensor] = []


def test_the_shared_walk_gives_each_tensor_its_own_referrers_in_order(monkeypatch: Any) -> None:
    a, b, lone, unannounced = (torch.ones(3) for _ in range(4))
    kept, both, owner = [a], {"x": a, "y": b}, Holder()
    owner.outs.append(b)
    owner.outs.append(b)  # twice in one list: one referrer, as gc.get_referrers gives it
    announced = [a, b, lone]
    heap = Referrers(announced)
    for t in announced:
        assert heap.of(t) == [r for r in gc.get_referrers(t) if r is not announced]
    assert any(r is kept for r in heap.of(a)) and any(r is both for r in heap.of(b))
    assert [r for r in heap.of(b) if r is owner.outs] == [owner.outs]
    assert [r for r in heap.of(lone) if type(r) is not dict] == []  # (the module's globals: this test's)

    walks = []
    real = gc.get_referrers
    monkeypatch.setattr(leak_owner.gc, "get_referrers", lambda *objs: walks.append(len(objs)) or real(*objs))
    heap = Referrers(announced)
    for t in announced:
        heap.of(t)
    assert walks == [3], walks  # one walk for the three announced tensors
    heap.of(unannounced)
    assert walks == [3, 1], walks  # a tensor not announced gets a walk of its own


def test_a_check_that_finds_a_kept_graph_walks_the_heap_once_and_keeps_nothing(monkeypatch: Any) -> None:
    """``total += model(x).sum()`` a step: the survivors of several lines (the model's saved
    tensors) have no Python container. Their owner searches share one walk, and once the
    run is over, nothing of the probe's keeps them alive."""
    heaps: list[Any] = []  # the shared walk each owner search was given
    walked: list[Any] = []  # the shared walks that ran
    owner_of, walk = ops_leaks._owner_of, Referrers._walk
    monkeypatch.setattr(ops_leaks, "_owner_of", lambda survivor, finder, heap: heaps.append(heap)
                        or owner_of(survivor, finder, heap))
    monkeypatch.setattr(Referrers, "_walk", lambda self: walked.append(self) or walk(self))
    acct = OpAccountant(lambda kind, **fields: None, budget=0.5, device_kind="cpu")

    def train() -> list[weakref.ref[torch.Tensor]]:  # (its frame, and the locals the checks read, end here)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
        x = torch.randn(4, 8)
        total: Any = 0.0
        refs = []
        for step in range(40):
            acct.on_step_boundary(step, None if step == 0 else 0.005)
            out = model(x)
            total = total + out.sum()
            refs.append(weakref.ref(out))
        acct.close()
        return refs

    refs = train()
    searched = len(acct._leaks._owners)
    assert searched >= 2 and len(heaps) == searched, acct._leaks._owners  # several lines were searched
    assert all(heap is not None for heap in heaps), heaps  # each with its check's shared walk
    assert len(walked) == len({id(heap) for heap in heaps}) < searched, (walked, heaps)  # one walk a check
    gc.collect()
    assert all(r() is None for r in refs)
