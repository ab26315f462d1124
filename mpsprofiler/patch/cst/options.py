"""A command-line option's default set to the fix's number (``add_argument("--workers",
default=8)``), where the call that reads it (``num_workers=args.workers``) keeps it, so the
option keeps working.

Whether the number may go there is not decided here: the diagnosis decides it once
(``diagnosis/analyzers/cli_option.py``: ``call_option`` and ``Option.movable``: read by this
call alone, the run took the default), for the finding's code and for the patch alike. This
module only makes the edit, found again by libcst in the text as the earlier edits left it.
"""

from __future__ import annotations

import libcst as cst

from .nodes import _expr, _parse


def set_option_default(source: str, dest: str, value: str) -> str:
    """The text with the one ``add_argument`` that stores into ``dest`` given
    ``default=value``; the text unchanged where there is not exactly one."""
    module = _parse(source)
    defining = [c for c in _calls(module) if _dest(c) == dest]
    if len(defining) != 1:
        return source
    edited = _with_default(defining[0], value)

    class Defaults(cst.CSTTransformer):
        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
            return edited if original is defining[0] else updated

    return module.visit(Defaults()).code


def _calls(module: cst.Module) -> list[cst.Call]:
    found: list[cst.Call] = []

    class Find(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Attribute) and node.func.attr.value == "add_argument":
                found.append(node)

    module.visit(Find())
    return found


def _flags(call: cst.Call) -> list[str]:
    return [a.value.evaluated_value for a in call.args if a.keyword is None and isinstance(a.value, cst.SimpleString)
            and isinstance(a.value.evaluated_value, str) and a.value.evaluated_value.startswith("-")]


def _dest(call: cst.Call) -> str | None:
    """The attribute ``add_argument`` stores into, as argparse derives it."""
    for a in call.args:
        if a.keyword is not None and a.keyword.value == "dest" and isinstance(a.value, cst.SimpleString):
            return str(a.value.evaluated_value)
    flags = _flags(call)
    long = [f for f in flags if f.startswith("--")]
    chosen = long[0] if long else (flags[0] if flags else None)
    return chosen.lstrip("-").replace("-", "_") if chosen else None


def _with_default(call: cst.Call, value: str) -> cst.Call:
    args = list(call.args)
    for i, a in enumerate(args):
        if a.keyword is not None and a.keyword.value == "default":
            args[i] = a.with_changes(value=_expr(value))
            return call.with_changes(args=args)
    last = args[-1]
    if last.comma == cst.MaybeSentinel.DEFAULT:
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    args.append(cst.Arg(value=_expr(value), keyword=cst.Name("default"),
                        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                              whitespace_after=cst.SimpleWhitespace(""))))
    return call.with_changes(args=args)
