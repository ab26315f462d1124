"""State carried from one training step into the next with its autograd history.

An RNN's hidden state (``out, hidden = rnn(x, hidden)``) or a running sum of losses
(``total = total + loss``): a tensor computed in one step and fed into the next keeps the
graph of every step before it. The next ``backward()`` then walks back into the previous
step's graph and fails in torch/csrc/autograd/saved_variable.cpp, ``SavedVariable::unpack``:
"Trying to backward through the graph a second time" (that step's backward freed its saved
tensors), or, with ``retain_graph=True``, "one of the variables needed for gradient
computation has been modified by an inplace operation" (``optimizer.step()`` has since
changed in place the weights that graph saved). torch's own hint, ``retain_graph=True``,
keeps the old graph alive instead of cutting it; the cut is ``.detach()`` at the top of
each step, as pytorch/examples word_language_model/main.py does with ``repackage_hidden``
("Wraps hidden states in new Tensors, to detach them from their history").

The carried names are read from the script with :mod:`ast`, for the crash's frames from
the innermost user frame out: the innermost loop around the frame's line, and in its body
the names read before the body assigns them and assigned again later from a computation,
so a value flows from one iteration into the next. Left out: the loop's own variables,
values that cannot hold a graph (``.item()``, ``float()``, constants, a counter's
``i = i + 1``), and names the body already cuts (``h = h.detach()``, ``h.detach_()``,
``h = repackage_hidden(h)``). A name a statement both reads in a call and assigns
(``rnn(x, hidden)``) comes first. Reading fails quietly: no carried name, and the crash's
other rules speak.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ...resources import is_own_file
from ...session.session import Session
from .crash import classify
from .registry import analyzer
from .source_edit import read_tree, short_path

AUTOGRAD_KINDS = ("backward_twice", "inplace_modified")
"""The crash kinds (analyzers/crash.py) a carried graph explains."""

NO_GRAPH = frozenset({"item", "float", "int", "bool", "len", "str", "tolist", "numpy", "detach", "cpu_item"})
"""Calls whose result holds no autograd graph: a value assigned from one carries nothing."""
CUTS = frozenset({"detach", "detach_", "repackage_hidden"})
"""Calls that cut a name's history (``h = h.detach()``, ``h.detach_()``, a helper of that name)."""

CARRIED_FACTS: tuple[str, ...] = (
    "carried_name", "carried_names", "carried_place", "carried_code", "carried_loop_place", "carried_loop_code",
    "carried_indent", "crash_retain_graph", "crash_saved_tensor", "crash_saved_node", "crash_saved_version",
    "crash_saved_expected", "backward_sum", "backward_calls", "backward_first_place",
)
_SAVED = re.compile(r"modified by an inplace operation: \[(?P<tensor>[^\]]*\[[^\]]*\])\], which is output \d+ of "
                    r"(?P<node>\w+), is at version (?P<v>\d+); expected version (?P<e>\d+) instead")


@dataclass(frozen=True)
class Carried:
    """A name that flows from one iteration of ``loop`` into the next with its graph."""

    name: str
    line: int
    """The statement that assigns it again (from a computation)."""
    in_call: bool
    """That statement also reads it as a call's argument (``rnn(x, hidden)``): ranked first."""


@dataclass(frozen=True)
class Loop:
    line: int
    """The loop's header line."""
    body_line: int
    """The first statement of its body: where a cut goes."""
    indent: int
    """The column of that statement."""
    carried: tuple[Carried, ...]


def _dotted(node: ast.AST) -> str | None:
    """``h`` or ``self.h`` (a name, or one attribute of a name), else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return None


def _targets(node: ast.AST) -> Iterator[str]:
    if isinstance(node, (ast.Tuple, ast.List)):
        for item in node.elts:
            yield from _targets(item)
    elif isinstance(node, ast.Starred):
        yield from _targets(node.value)
    else:
        name = _dotted(node)
        if name is not None:
            yield name


def _reads(node: ast.AST) -> set[str]:
    """Names (and ``a.b`` of a name) an expression loads."""
    found: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Load):
            name = _dotted(n)
            if name is not None:
                found.add(name)
    return found


def _call_name(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        f = node.func
        return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    return ""


def _keeps_graph(value: ast.AST, name: str) -> bool:
    """Whether ``name = value`` can hand a graph on: some part of ``value`` is a call whose
    result can hold one (not ``.item()``, ``float()``, ``.detach()``...) or another name;
    constants, comparisons and ``name`` itself add none (``i = i + 1``, ``total = total +
    loss.item()`` carry nothing). Forms not listed count as no graph: a wrong name would be
    worse advice than none."""
    if isinstance(value, ast.Call):
        return _call_name(value) not in NO_GRAPH
    dotted = _dotted(value)
    if dotted is not None:
        return dotted != name
    if isinstance(value, ast.BinOp):
        return _keeps_graph(value.left, name) or _keeps_graph(value.right, name)
    if isinstance(value, ast.UnaryOp):
        return _keeps_graph(value.operand, name)
    if isinstance(value, ast.IfExp):
        return _keeps_graph(value.body, name) or _keeps_graph(value.orelse, name)
    if isinstance(value, (ast.Tuple, ast.List)):
        return any(_keeps_graph(e, name) for e in value.elts)
    if isinstance(value, (ast.Subscript, ast.Attribute)):
        return _keeps_graph(value.value, name)
    return False


def _cut(stmt: ast.stmt) -> set[str]:
    """Names this statement cuts from their history."""
    cut: set[str] = set()
    for n in ast.walk(stmt):
        if isinstance(n, ast.Call) and _call_name(n) in CUTS:
            f = n.func
            if isinstance(f, ast.Attribute):
                name = _dotted(f.value)
                if name is not None:
                    cut.add(name)
            cut.update(name for a in n.args if (name := _dotted(a)) is not None)
    return cut


def _flat(stmts: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of a loop body in order, into if/with/try/inner loops, not into
    function or class definitions."""
    for s in stmts:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        yield s
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(s, field, None)
            if isinstance(inner, list):
                yield from _flat(inner)
        for handler in getattr(s, "handlers", None) or []:
            yield from _flat(handler.body)


def _parts(stmt: ast.stmt) -> tuple[set[str], list[str], ast.AST | None]:
    """What a statement reads, the names it assigns, and the value it assigns them."""
    if isinstance(stmt, ast.Assign):
        return _reads(stmt.value), [t for tgt in stmt.targets for t in _targets(tgt)], stmt.value
    if isinstance(stmt, ast.AugAssign):
        names = list(_targets(stmt.target))
        value = ast.BinOp(left=stmt.target, op=stmt.op, right=stmt.value)
        return _reads(stmt.value) | set(names), names, value
    if isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        return _reads(stmt.value), list(_targets(stmt.target)), stmt.value
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return _reads(stmt.iter), list(_targets(stmt.target)), None
    if isinstance(stmt, (ast.If, ast.While)):
        return _reads(stmt.test), [], None
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return set().union(*(_reads(i.context_expr) for i in stmt.items)), [], None
    if isinstance(stmt, ast.Try):
        return set(), [], None
    return _reads(stmt), [], None


def carried_in(loop: ast.For | ast.AsyncFor | ast.While) -> tuple[Carried, ...]:
    """The names that flow from one iteration of ``loop`` into the next with a graph."""
    own = set(_targets(loop.target)) if isinstance(loop, (ast.For, ast.AsyncFor)) else set()
    assigned: set[str] = set(own)
    read_first: set[str] = set()
    found: dict[str, Carried] = {}
    cut: set[str] = set()
    for stmt in _flat(loop.body):
        reads, names, value = _parts(stmt)
        read_first |= reads - assigned
        cut |= _cut(stmt)
        for name in names:
            if name in read_first and name not in own and value is not None and _keeps_graph(value, name):
                in_call = any(name in _reads(arg) for n in ast.walk(value) if isinstance(n, ast.Call)
                              for arg in [*n.args, *(k.value for k in n.keywords)])
                found.setdefault(name, Carried(name, stmt.lineno, in_call))
            assigned.add(name)
    kept = [c for c in found.values() if c.name not in cut]
    return tuple(sorted(kept, key=lambda c: (not c.in_call, c.line)))


LOOPS = (ast.For, ast.AsyncFor, ast.While)
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _innermost(tree: ast.Module, line: int, kinds: tuple[type[ast.stmt], ...]) -> Any:
    """The innermost node of ``kinds`` whose body holds ``line`` (None: none does)."""
    best: Any = None
    for node in ast.walk(tree):
        if not isinstance(node, kinds):
            continue
        body = getattr(node, "body", None)
        if body and body[0].lineno <= line <= (node.end_lineno or node.lineno) and (
                best is None or node.lineno >= best.lineno):
            best = node
    return best


def loop_at(tree: ast.Module, line: int) -> Loop | None:
    """The innermost loop whose body holds ``line``, with what it carries."""
    loop = _innermost(tree, line, LOOPS)
    if loop is None:
        return None
    first = loop.body[0]
    return Loop(loop.lineno, first.lineno, first.col_offset, carried_in(loop))


def backward_calls(tree: ast.Module, line: int) -> list[tuple[str, int]]:
    """The ``X.backward(...)`` calls up to ``line`` in the innermost loop (else function)
    around it: (``X`` as written, line), in order. Two of them on one forward pass is the
    second backward's crash."""
    scope = _innermost(tree, line, LOOPS + FUNCTIONS) or tree
    found = {(ast.unparse(n.func.value), n.lineno) for n in ast.walk(scope)
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "backward"
             and n.lineno <= line}
    return sorted(found, key=lambda x: x[1])


@analyzer("carried", provides=CARRIED_FACTS)
def carried_facts(session: Session) -> dict[str, Any]:
    crash = session.crash
    if crash is None:
        return {}
    message = crash.message or ""
    kind = classify(crash.type, message)
    if kind not in AUTOGRAD_KINDS:
        return {}
    facts: dict[str, Any] = {"carried_name": None}  # said, so the other autograd rules can tell
    saved = _SAVED.search(message)
    if saved:
        facts.update(crash_saved_tensor=saved.group("tensor"), crash_saved_node=saved.group("node"),
                     crash_saved_version=int(saved.group("v")), crash_saved_expected=int(saved.group("e")))
    frames = [f for f in reversed(crash.frames) if f.get("user") and not is_own_file(str(f.get("file", "")))]
    code = str(frames[0].get("code") or "") if frames else ""
    facts["crash_retain_graph"] = bool(re.search(r"retain_graph\s*=\s*True", code))
    cwd = session.run.get("cwd")
    trees: dict[str, tuple[str, ast.Module] | None] = {}

    def tree_of(path: str) -> tuple[str, ast.Module] | None:
        """Each file read and parsed once (the crash's frames are often in one file)."""
        if path not in trees:
            trees[path] = read_tree(path)
        return trees[path]

    if kind == "backward_twice" and frames:
        path, line = str(frames[0].get("file") or ""), int(frames[0].get("line") or 0)
        read = tree_of(path)
        calls = backward_calls(read[1], line) if read is not None and line else []
        if len({name for name, _ in calls}) >= 2:
            facts.update(backward_calls=[f"{name}.backward()" for name, _ in calls],
                         backward_sum=" + ".join(dict.fromkeys(name for name, _ in calls)),
                         backward_first_place=f"{short_path(path, cwd)}:{calls[0][1]}")
    for frame in frames:
        path, line = str(frame.get("file") or ""), int(frame.get("line") or 0)
        read = tree_of(path)
        loop = loop_at(read[1], line) if read is not None and line else None
        if read is None or loop is None or not loop.carried:
            continue
        lines = read[0].splitlines()
        top = loop.carried[0]
        where = short_path(path, cwd)
        facts.update(
            carried_name=top.name, carried_names=[c.name for c in loop.carried],
            carried_place=f"{where}:{top.line}", carried_code=lines[top.line - 1].strip(),
            carried_loop_place=f"{where}:{loop.line}", carried_loop_code=lines[loop.line - 1].strip(),
            carried_indent=" " * loop.indent,
        )
        break
    return facts
