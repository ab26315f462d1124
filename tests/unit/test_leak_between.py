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


def test_a_kept_containers_tensors_are_sized_whatever_their_batch() -> None:
    """held_bytes (issue 28): a Trainer's compute_loss keeps 8-sample training logits and
    32-sample evaluation logits in one list; the list's bytes are each tensor's own size,
    each storage once (a view of a kept tensor adds nothing), a list of tuples or dicts
    one level in; a long list is sized from an even sample, scaled to its length."""
    from mpsprofiler.probe.ops_leaks import MAX_HELD_ITEMS, held_bytes

    train, evaluation = torch.zeros(8, 100), torch.zeros(32, 100)
    assert held_bytes([train, train[:2], evaluation]) == (8 + 32) * 100 * 4
    assert held_bytes([(train, 3), {"logits": evaluation}]) == (8 + 32) * 100 * 4
    assert held_bytes({"a": train}) == 8 * 100 * 4
    assert held_bytes([]) is None and held_bytes([1.0, 2.0]) is None and held_bytes(None) is None
    many = [torch.zeros(10) for _ in range(3 * MAX_HELD_ITEMS)]
    assert held_bytes(many) == 3 * MAX_HELD_ITEMS * 40
