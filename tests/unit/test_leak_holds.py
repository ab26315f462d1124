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


def test_the_container_search_runs_no_getattribute_of_the_scripts_objects() -> None:
    """On an object of another type ``isinstance`` reads ``__class__``, and ``getattr(o,
    "__dict__")`` too, both through the class's own ``__getattribute__`` (a lazy proxy that
    loads or raises, a config's attribute map): the search for the container that keeps a
    leaked tensor tells kinds by type and reads ``__dict__`` directly, so none of that code
    runs, and the list behind such an object is still found."""
    from mpsprofiler.probe.ops_leaks import _holder_in, _keyed, held_bytes

    ran: list[str] = []

    class Lazy:
        def __init__(self, kept: list[Any]) -> None:
            self.kept = kept

        def __getattribute__(self, name: str) -> object:
            ran.append(name)
            raise RuntimeError("not loaded yet")

    survivor = torch.ones(4)
    box = Lazy([1, survivor])  # noqa: F841 - read from this frame's locals below
    found = _holder_in(sys._getframe(), survivor, set())
    assert found is not None and found[0] == "box.kept" and ran == []
    assert not _holds(Lazy([survivor]), survivor) and ran == []
    assert _keyed("d", {"k": Lazy([survivor])}, survivor)[0] == "d" and ran == []
    assert held_bytes([Lazy([]), survivor, (Lazy([]), survivor)]) == 16 and ran == []
