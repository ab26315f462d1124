"""A call's argument that is a command-line option (``num_workers=args.val_workers``): the
edit goes to the option's default (``add_argument("--val-workers", default=4)``), so the
option keeps working.

Writing the number over ``args.val_workers`` made ``--val-workers`` silently do nothing.
Only where it is safe: no other call is handed the option (another loader would change
too), one ``add_argument`` defines it, and the run's own command line does not set it (then its default is not what ran, and
the number goes to the call as before).
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from .calls import find_call
from .nodes import _expr, _parse


def option_defaults(source: str, line: int, names: Sequence[str], changes: dict[str, str],
                    argv: Sequence[str]) -> tuple[str, dict[str, str], dict[str, tuple[str, str]]]:
    """(the text with the options' defaults set, the changes still to make at the call, the
    option each moved change went to, as its flag and the call's expression:
    ``{"num_workers": ("--val-workers", "args.val_workers")}``)."""
    module = _parse(source)
    call = find_call(module, line, names)
    rest = dict(changes)
    moved: dict[str, tuple[str, str]] = {}
    edits: dict[cst.Call, cst.Call] = {}
    for arg in call.args:
        if arg.keyword is None or arg.keyword.value not in changes:
            continue
        value = arg.value
        if not (isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name)):
            continue
        namespace, dest = value.value.value, value.attr.value
        if _reads(module, namespace, dest) != 1:
            continue
        defining = [c for c in _calls(module) if _dest(c) == dest]
        if len(defining) != 1:
            continue
        flags = _flags(defining[0])
        if not flags or any(a == f or a.startswith(f + "=") for a in argv for f in flags):
            continue  # the run set it: its default is not what ran
        edits[defining[0]] = _with_default(defining[0], rest.pop(arg.keyword.value))
        moved[arg.keyword.value] = (flags[-1], f"{namespace}.{dest}")
    if not edits:
        return source, changes, {}

    class Defaults(cst.CSTTransformer):
        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
            return edits.get(original, updated)

    return module.visit(Defaults()).code, rest, moved


def _calls(module: cst.Module) -> list[cst.Call]:
    found: list[cst.Call] = []

    class Find(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Attribute) and node.func.attr.value == "add_argument":
                found.append(node)

    module.visit(Find())
    return found


def _reads(module: cst.Module, namespace: str, dest: str) -> int:
    """Calls the option is handed to as an argument: another loader given the same option
    would change with its default (a log line that prints it may, and then says true)."""
    count = [0]

    class Count(cst.CSTVisitor):
        def visit_Arg(self, node: cst.Arg) -> None:
            value = node.value
            if (isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name)
                    and value.value.value == namespace and value.attr.value == dest):
                count[0] += 1

    module.visit(Count())
    return count[0]


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
