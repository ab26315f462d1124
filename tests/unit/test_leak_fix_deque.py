"""The "or keep only the last N" alternative of a leak's fix is a ``collections.deque``:
offered only where the script uses the list in ways a deque takes too (a deque cannot be
sliced, sorted in place, added to a list or dumped as JSON: the fix must work as written)."""

from __future__ import annotations

import ast
import collections
import json

import pytest

from mpsprofiler.diagnosis.analyzers.leak_fix import deque_safe

SAFE = [
    ("h = []\nfor i in range(3):\n    h.append(i)\nprint(h[-1], len(h), sum(h))\n", "h"),
    ("class T:\n    def log(self, x):\n        self.history.append(x)\n    def last(self):\n        return self.history[-1]\n",
     "self.history"),
]
UNSAFE = [
    ("class T:\n    def log(self, x):\n        self.history.append(x)\n    def s(self):\n        return self.history[-10:]\n",
     "self.history"),
    ("h = []\nh.append(1)\nh.sort()\n", "h"),
    ("h = []\nh.append(1)\nall_ = h + [2]\n", "h"),
    ("import json\nh = []\nh.append(1)\njson.dumps(h)\n", "h"),
    ("hist = {'loss': []}\nhist['loss'].append(1)\nprint(hist['loss'][-5:])\n", "hist['loss']"),
]


@pytest.mark.parametrize("source,holder", SAFE)
def test_a_list_used_as_a_deque_allows_gets_the_alternative(source: str, holder: str) -> None:
    assert deque_safe(ast.parse(source), holder)


@pytest.mark.parametrize("source,holder", UNSAFE)
def test_a_list_used_as_only_a_list_allows_gets_none(source: str, holder: str) -> None:
    assert not deque_safe(ast.parse(source), holder)


def test_the_uses_called_unsafe_do_fail_on_a_deque() -> None:
    """What the rule encodes, read from Python itself, not assumed."""
    d: collections.deque[int] = collections.deque([1, 2, 3], maxlen=100)
    for use in (lambda: d[-2:], lambda: d.sort(), lambda: d + [4], lambda: json.dumps(d)):  # type: ignore[attr-defined, operator]
        with pytest.raises((TypeError, AttributeError)):
            use()
    assert d[-1] == 3 and len(d) == 3 and sum(d) == 6  # what SAFE's scripts do
