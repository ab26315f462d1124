"""The line that keeps a leak, rewritten, and the rate its container grows at.

The probe names the container (``kept``, ``self.outs``) and the line that adds to it
(:mod:`mpsprofiler.probe.ops_leaks`); here that line is read back from the script with
:mod:`ast` and rewritten with the user's own names: keep a number or a detached tensor,
or bound the container where it is created. The rate comes from the container's length
at two checks (appends every 5th step included), times the bytes one item holds.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import Any, TypeGuard

from .source_edit import read_tree

ADDS = frozenset({"append", "extend", "insert", "add", "appendleft"})
KEEP_LAST = 100


def growth_kib_per_step(site: Any) -> float | None:
    """KiB per step the container grows by: items added per step x KiB per item, or None."""
    steps = site.holder_step - site.holder_step0
    added = site.holder_size - site.holder_size0
    if steps <= 0 or added <= 0 or site.alive <= 0 or site.bytes <= 0:
        return None
    return float(added / steps * site.bytes / site.alive / 1024.0)


def keep_fix(site: Any) -> dict[str, Any]:
    """``leak_site_fix_code``: the adding line rewritten (and the container bounded where it
    is created), or {} when the line cannot be read back."""
    if not site.holder or not site.holder_file or not site.holder_line:
        return {}
    read = read_tree(site.holder_file)
    if read is None:
        return {}
    source, tree = read
    stmt = next((n for n in ast.walk(tree) if isinstance(n, ast.stmt) and n.lineno == site.holder_line
                 and n.end_lineno == site.holder_line), None)
    if stmt is None:
        return {}
    new = _rewritten(source, stmt, site.grad, site.holder)
    if new is None:
        return {}
    if isinstance(stmt, ast.Assign):  # `cache[step] = h`: bounded where the key is set
        return {"leak_site_fix_code": new}
    lines = [new]
    keyed = _KEYED.match(site.holder)
    if keyed is not None:  # `history['loss']`: a list kept in a dict
        return {"leak_site_fix_code": "\n".join(lines + _bounded_values(source, tree, keyed[1], site.holder,
                                                                        site.holder_line))}
    made = _creation(source, tree, site.holder, site.holder_line)
    if made is not None:
        line, text = made
        lines += ["", f"# or keep only the last {KEEP_LAST}, where `{site.holder}` is made (line {line}):",
                  f"{text.split('=', 1)[0].rstrip()} = collections.deque(maxlen={KEEP_LAST})  # import collections"]
    else:
        lines += ["", f"# or keep only the last {KEEP_LAST}: make `{site.holder}` a bounded deque where it is made",
                  f"{site.holder} = collections.deque(maxlen={KEEP_LAST})  # import collections"]
    return {"leak_site_fix_code": "\n".join(lines)}


_KEYED = re.compile(r"^(.+)\[(?:'[^']*'|\"[^\"]*\"|-?\d+)\]$")
"""A holder named by a key of a dict (probe/ops_leaks._keyed): ``history['loss']``."""


def _bounded_values(source: str, tree: ast.Module, root: str, holder: str, line: int) -> list[str]:
    """Lines that bound a list kept in a dict: where ``root`` is made by ``defaultdict(list)``,
    a defaultdict of bounded deques; else that one key's list, replaced before the loop."""
    made = _creation(source, tree, root, line, _makes_defaultdict_of_lists)
    if made is not None:
        at, text = made
        return ["", f"# or keep only the last {KEEP_LAST} of each, where `{root}` is made (line {at}):",
                f"{text.split('=', 1)[0].rstrip()} = collections.defaultdict("
                f"lambda: collections.deque(maxlen={KEEP_LAST}))  # import collections"]
    return ["", f"# or keep only the last {KEEP_LAST}: make `{holder}` a bounded deque before the loop",
            f"{holder} = collections.deque(maxlen={KEEP_LAST})  # import collections"]


def _makes_defaultdict_of_lists(value: ast.expr) -> bool:
    return (isinstance(value, ast.Call) and ast.unparse(value.func) in ("defaultdict", "collections.defaultdict")
            and len(value.args) == 1 and not value.keywords and ast.unparse(value.args[0]) == "list")


def _makes_list(value: ast.expr) -> bool:
    return isinstance(value, ast.List) or (isinstance(value, ast.Call) and ast.unparse(value.func) == "list")


NUMBERS = frozenset({"item", "tolist", "float", "int", "len", "round"})
"""Calls whose result is a number, not the kept tensor: a line adding one is not the leak."""


def _rewritten(source: str, stmt: ast.stmt, grad: bool, holder: str) -> str | None:
    """The adding line rewritten; None unless it adds one tensor-like value to ``holder``
    itself (a line adding ``loss.item()``, or to another container, is not the one)."""
    seg = ast.get_source_segment
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        call = stmt.value
        if not isinstance(call.func, ast.Attribute) or call.func.attr not in ADDS or len(call.args) != 1:
            return None
        if ast.unparse(call.func.value) != holder or _number(call.args[0]):
            return None
        owner, value = seg(source, call.func.value), seg(source, call.args[0])
        if owner is None or value is None:
            return None
        if isinstance(call.args[0], (ast.Tuple, ast.List, ast.Dict)):
            return None  # several values: no single rewrite fits
        keep = f"{value}.detach()" if grad else f"{value}.mean().item()"
        why = "  # no autograd graph kept" if grad else "  # a number, not the tensor (or what you need of it)"
        return f"{owner}.{call.func.attr}({keep}){why}"
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Subscript):
        # `cache[step] = h`: a dict that gains a key every step keeps every step's tensor,
        # graph or not (.detach() alone left an unseen script growing as fast): drop the
        # oldest keys past KEEP_LAST as the line sets one (patch/cst/kept.keyed_value_bounded)
        subscript = stmt.targets[0]
        if ast.unparse(subscript.value) != holder or _number(stmt.value) \
                or isinstance(stmt.value, (ast.Tuple, ast.List, ast.Dict)):
            return None
        key, value = seg(source, subscript), seg(source, stmt.value)
        if key is None or value is None:
            return None
        keep = f"{value}.detach()  # no autograd graph kept" if grad else value
        return (f"{key} = {keep}\nwhile len({holder}) > {KEEP_LAST}:  # a new key every step: keep the newest "
                f"{KEEP_LAST}\n    {holder}.pop(next(iter({holder})))")
    if isinstance(stmt, ast.AugAssign):
        if ast.unparse(stmt.target) != holder or _number(stmt.value):
            return None
        target, value = seg(source, stmt.target), seg(source, stmt.value)
        if target is None or value is None:
            return None
        return f"{target} += ({value}).item()  # a number: no tensor or graph kept"
    return None


def _number(value: ast.expr) -> bool:
    if isinstance(value, ast.Constant):
        return True
    if isinstance(value, ast.Call):
        func = value.func
        return (func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else "") in NUMBERS
    return False


def _creation(source: str, tree: ast.Module, name: str, line: int,
              kind: Callable[[ast.expr], bool] = _makes_list) -> tuple[int, str] | None:
    """The one-line ``name = []`` (or ``list()``; ``kind`` says which values) that makes the container the line at
    ``line`` adds to: for ``self.<attr>`` one in the class of that line (its ``__init__``'s
    where the class makes it in several methods), for a plain name one in the function of
    that line, else at the module's top level; None when it is not one line (no guess:
    another class of the file may make a ``self.outs`` of its own)."""
    def makes(node: ast.AST) -> TypeGuard[ast.Assign]:
        return (isinstance(node, ast.Assign) and len(node.targets) == 1 and node.lineno == node.end_lineno
                and ast.unparse(node.targets[0]) == name and kind(node.value))

    def within(kinds: tuple[type[ast.AST], ...]) -> list[ast.AST]:
        """The nodes of ``kinds`` that hold ``line``, innermost first."""
        found = [n for n in ast.walk(tree) if isinstance(n, kinds)
                 and getattr(n, "lineno", 0) <= line <= (getattr(n, "end_lineno", None) or 0)]
        return sorted(found, key=lambda n: -getattr(n, "lineno", 0))

    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    made: list[ast.Assign] = []
    if name.startswith("self."):
        cls = next(iter(within((ast.ClassDef,))), None)
        made = [n for n in ast.walk(cls) if makes(n)] if cls is not None else []
        if len(made) > 1 and cls is not None:
            made = [n for f in ast.iter_child_nodes(cls) if isinstance(f, functions) and f.name == "__init__"
                    for n in ast.walk(f) if makes(n)]
    else:  # the function of the line, those around it, then the module's top level
        for function in within(functions):
            made = made or [n for n in ast.walk(function) if makes(n)]
        made = made or [n for n in tree.body if makes(n)]
    if len(made) != 1:
        return None
    text = ast.get_source_segment(source, made[0])
    return (made[0].lineno, text) if text else None
