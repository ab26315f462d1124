"""A device named as a string, replaced by the choice of what the machine has.

The literal the finding names (``"mps"`` in ``torch.device("mps")``, ``default="cuda"``)
becomes the expression :func:`mpsprofiler.diagnosis.analyzers.device_choice.chooser`
writes; libcst keeps the rest of the line as it was, the string's own quotes included.
"""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from .imports import _name_used
from .nodes import NotFound, _parse


class _Swap(cst.CSTTransformer):
    def __init__(self, targets: set[int], expression: Callable[[str, str], str]) -> None:
        self.targets, self.expression = targets, expression

    def leave_SimpleString(self, original: cst.SimpleString,
                           updated: cst.SimpleString) -> cst.BaseExpression:  # noqa: N802 (libcst's name)
        if id(original) not in self.targets:
            return updated
        quote = original.quote if len(original.quote) == 1 else '"'
        return cst.parse_expression(self.expression(str(original.evaluated_value), quote))


def device_string_at(source: str, line: int, literal: str, expression: Callable[[str, str], str]) -> str:
    """Every string ``literal`` on ``line`` replaced by ``expression(literal, quote)`` (a
    Python expression, written with the string's own quote); :class:`NotFound` when the
    line holds no such string."""
    module = _parse(source)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    targets = {id(node) for node, pos in positions.items()
               if isinstance(node, cst.SimpleString) and pos.start.line == line and node.evaluated_value == literal}
    if not targets:
        raise NotFound(f'line {line} holds no string "{literal}"')
    return module.visit(_Swap(targets, expression)).code


def _cuda_only(arg: cst.Arg, name: str) -> cst.Arg:
    """``non_blocking=V`` kept for CUDA only: ``V and name.type == "cuda"``. The chosen device
    may be a Mac's MPS, where a non-blocking copy from pageable CPU memory can read the source
    after Python freed it and silently corrupt the batch (pytorch/pytorch#139550, #189690,
    both open); a blocking copy gives the same values everywhere."""
    cuda = f'{name}.type == "cuda"'
    value = arg.value
    if isinstance(value, cst.Name) and value.value == "False":
        return arg
    code = cst.Module([]).code_for_node(value)
    if isinstance(value, cst.Name) and value.value == "True":
        text = cuda
    else:
        text = f"{code if isinstance(value, (cst.Name, cst.Attribute)) else f'({code})'} and {cuda}"
    return arg.with_changes(value=cst.parse_expression(text))


class _CudaCalls(cst.CSTTransformer):
    """``x.cuda()`` -> ``x.to(name)`` (``non_blocking=`` kept for CUDA only, :func:`_cuda_only`);
    another argument is refused."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.lines: list[int] = []
        self.refused: list[int] = []

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:  # noqa: N802 (libcst's name)
        func = updated.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "cuda":
            return updated
        line = self.get_metadata(PositionProvider, original).start.line
        if any(a.keyword is None or a.keyword.value != "non_blocking" for a in updated.args):
            self.refused.append(line)  # .cuda(0), .cuda(device=...): which device is the user's to say
            return updated
        self.lines.append(line)
        args = [cst.Arg(cst.Name(self.name)),
                *[_cuda_only(a, self.name).with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in updated.args]]
        fixed = [a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))) if i < len(args) - 1
                 else a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for i, a in enumerate(args)]
        return updated.with_changes(func=func.with_changes(attr=cst.Name("to")), args=fixed)


def cuda_calls_to(source: str, name: str) -> tuple[str, list[int]]:
    """Every ``.cuda()`` call of the module made ``.to(name)``; returns the text and the
    lines changed. :class:`NotFound` where a call gives ``.cuda()`` an argument (a device
    index: which device is the user's to say), where the module has none, or where it uses
    ``name`` already."""
    module = _parse(source)
    if _name_used(module, name):
        raise NotFound(f"the script uses the name `{name}` already")
    wrapper = MetadataWrapper(module)
    swap = _CudaCalls(name)
    new = wrapper.visit(swap)
    if swap.refused:
        raise NotFound(f".cuda(...) with an argument at line {swap.refused[0]}: which device it means is yours to say")
    if not swap.lines:
        raise NotFound("the file calls no .cuda()")
    return new.code, sorted(set(swap.lines))
