"""probe/leak_between.py on real frames: a list grown between the checks with tensors that
keep their graphs is told with its append line; one emptied, or holding detached tensors,
or short, is not."""

from __future__ import annotations

import torch

from mpsprofiler.probe.leak_between import MIN_ITEMS, BetweenScan
from mpsprofiler.probe.ops_leaks import _adding_line

kept: list[torch.Tensor] = []
plain: list[torch.Tensor] = []
W = torch.ones(4, 4, requires_grad=True)


def _mine(code: object) -> bool:
    return getattr(code, "co_filename", None) == __file__


def evaluate(n: int) -> None:
    for _ in range(n):
        kept.append(W @ torch.ones(4, 1))
        plain.append((W @ torch.ones(4, 1)).detach())


def test_a_list_an_evaluation_grows_with_graphs_is_told_at_its_append() -> None:
    scan = BetweenScan()
    kept.clear()
    plain.clear()
    for step in (5, 7, 10, 15):
        evaluate(3)  # the pass between two checks
        scan.check(step, _mine, _adding_line)
    (found,) = scan.found()
    assert found["name"] == "kept" and found["file"] == __file__
    lines = open(__file__).read().splitlines()
    assert lines[found["line"] - 1].strip() == "kept.append(W @ torch.ones(4, 1))"
    assert found["size"] == 12 >= MIN_ITEMS and found["step"] == 15 and found["nodes"] >= 1
    # emptied (an epoch's list made anew): starts over, nothing told until it grows again twice
    kept.clear()
    evaluate(1)
    scan.check(22, _mine, _adding_line)
    assert scan.found() == []
    kept.clear()


def test_a_short_list_is_not_told() -> None:
    scan = BetweenScan()
    kept.clear()
    for step in (5, 7, 10):
        evaluate(1)
        scan.check(step, _mine, _adding_line)
    assert scan.found() == []  # 3 items: a few losses kept for an accumulated backward
    kept.clear()
