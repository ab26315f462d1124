"""``ops_leaks._holds``: whether a container of the script holds a leaked tensor, without
running Python code per item.

Why: once a leak is found, each leak check looks for the container that keeps it in every
list, dict and deque of the user frames, of their objects and of their globals. Asked as a
Python generator, one item at a time, a tokenised corpus kept as a 3-million-item list of
ints cost ~0.2 s per look, several looks per check (the frames' locals, the globals), and a
3,000-step leaking run with such a list took 36 s more under cProfile. The scan is done in
C now (``map``/``operator.is_``): same answers, no Python frame per item.
"""

from __future__ import annotations

import collections
import sys
from typing import Any

import torch

from mpsprofiler.probe.ops_leaks import _holds


class Pair(tuple):  # a namedtuple-like subclass: its items are looked into as a tuple's
    pass


def test_answers_one_level_deep_as_before() -> None:
    t = torch.ones(1)
    other = torch.ones(1)
    holds = [[1, 2, t], [1, (2, t)], {"a": t}, {"a": (t,)}, (t,), collections.deque([5, (t,)]), [1, Pair((t,))],
             [0, [other, t]]]
    holds_not = [[1, [3, [t]]], {"a": {"b": t}}, (1, 2), [], [(1,), [2], 3], {t: 1}, {1: Pair((2,))}, 5, "x", t,
                 [other], {"k": [other]}]
    assert all(_holds(v, t) for v in holds)
    assert not any(_holds(v, t) for v in holds_not)


def _python_calls(fn: Any) -> int:
    """Python-level calls (a generator's resumptions count) while ``fn`` runs."""
    calls = 0

    def count(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        if event == "call":
            calls += 1

    sys.setprofile(count)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls


def test_a_long_container_is_scanned_without_python_per_item() -> None:
    t = torch.ones(1)
    for big in (list(range(10_000)), {i: i for i in range(10_000)}, [(i, i) for i in range(10_000)],
                collections.deque(range(10_000))):
        assert not _holds(big, t)
        assert _python_calls(lambda b=big: _holds(b, t)) < 20, type(big).__name__
