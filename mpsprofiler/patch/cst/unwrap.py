"""A ``with`` taken away and its body kept: ``with torch.autograd.detect_anomaly():`` around
a backward pass (the anomaly-detection-on fix), its statements one level out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import libcst as cst

from .nodes import NotFound, _innermost, _parse, call_name


def _is_named(item: cst.WithItem, names: Sequence[str]) -> bool:
    return isinstance(item.item, cst.Call) and call_name(item.item) in names


def unwrap_with(source: str, line: int, names: Sequence[str]) -> str:
    """The innermost ``with`` spanning ``line`` that enters a call of one of ``names``:
    that item removed, and where it was the only one, the whole ``with`` replaced by its
    body (libcst indents a block relative to its parent, so the statements move one level
    out as they are; the ``with``'s own leading comments go to its first statement). A
    body on the ``with``'s own line is refused."""
    module = _parse(source)
    found = _innermost(module, line, lambda n: isinstance(n, cst.With) and any(_is_named(i, names) for i in n.items))
    if not found:
        raise NotFound(f"no `with` of {' or '.join(names)}() at line {line}")
    block = found[0]
    assert isinstance(block, cst.With)
    keep = [i for i in block.items if not _is_named(i, names)]
    new: Any
    if keep:
        last = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        new = block.with_changes(items=[*keep[:-1], last])
    else:
        if not isinstance(block.body, cst.IndentedBlock):
            raise NotFound(f"the `with` at line {line} has its body on the same line; put it on lines of its own")
        body = list(block.body.body)
        first = cast(Any, body[0])  # a statement: SimpleStatementLine or a compound one, each has leading_lines
        body[0] = first.with_changes(leading_lines=[*block.leading_lines, *first.leading_lines])
        new = cst.FlattenSentinel(body)
    replaced = module.deep_replace(block, new)
    assert isinstance(replaced, cst.Module)
    return replaced.code
