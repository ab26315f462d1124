"""What every edit of :mod:`mpsprofiler.patch.cst` shares: parsing, finding the node at a
line, replacing it, and the small node helpers (a node's source text, the statement at a
line, the call a node is an argument of, the function spanning a line).

One place for them so each kind of edit (calls, kept graphs, imports, dtypes, the guard)
is a module of its own that depends on this one only, and :class:`NotFound` is one class
whatever edit raised it (the planner catches it to say "not patched").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider


class NotFound(Exception):
    """The construct an edit needs is not where the finding says (the reason is the text)."""


def _parse(source: str) -> cst.Module:
    try:
        return cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        raise NotFound(f"the file does not parse ({str(exc).splitlines()[0]})") from None


def call_name(call: cst.Call) -> str:
    func = call.func
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return ""


def _spans(pos: CodeRange, line: int) -> bool:
    return pos.start.line <= line <= pos.end.line


class _Finder(cst.CSTVisitor):
    """Nodes of a kind spanning a line, with their extent in lines."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, line: int, keep: Callable[[cst.CSTNode], bool]) -> None:
        self.line, self.keep = line, keep
        self.found: list[tuple[int, cst.CSTNode]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        pos = self.get_metadata(PositionProvider, node, None)
        if pos is None or not _spans(pos, self.line):
            return pos is None
        if self.keep(node):
            self.found.append((pos.end.line - pos.start.line, node))
        return True


def _innermost(module: cst.Module, line: int, keep: Callable[[cst.CSTNode], bool]) -> list[cst.CSTNode]:
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    finder = _Finder(line, keep)
    wrapper.visit(finder)
    return [n for _, n in sorted(finder.found, key=lambda t: t[0])]


def _replace(module: cst.Module, old: cst.CSTNode, new: cst.CSTNode) -> str:
    replaced = module.deep_replace(old, new)
    assert isinstance(replaced, cst.Module)
    return replaced.code


def _expr(text: str) -> cst.BaseExpression:
    return cst.parse_expression(text)


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def _statement(module: cst.Module, line: int) -> cst.SimpleStatementLine:
    found = _innermost(module, line, lambda n: isinstance(n, cst.SimpleStatementLine))
    if not found:
        raise NotFound(f"no simple statement at line {line}")
    stmt = found[0]
    assert isinstance(stmt, cst.SimpleStatementLine)
    return stmt


def _method(value: cst.BaseExpression, name: str) -> cst.Call:
    """``value.name()``, parenthesised when ``value`` is not an atom (``(a * b).item()``)."""
    if not isinstance(value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) or value.lpar:
        value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]) if not value.lpar else value
    return cst.Call(func=cst.Attribute(value=value, attr=cst.Name(name)))


def _is_attr_name(node: cst.CSTNode, parents: Mapping[cst.CSTNode, cst.CSTNode]) -> bool:
    """``x.total``'s ``total``, ``f(total=1)``'s keyword: a name, not the variable."""
    parent = parents.get(node)
    return (isinstance(parent, cst.Attribute) and parent.attr is node) or (
        isinstance(parent, cst.Arg) and parent.keyword is node)


def _call_taking(node: cst.CSTNode, parents: Mapping[cst.CSTNode, cst.CSTNode]) -> cst.Call | None:
    """The call ``node`` is an argument of (None: it is not one)."""
    arg = parents.get(node)
    call = parents.get(arg) if isinstance(arg, cst.Arg) else None
    return call if isinstance(call, cst.Call) and arg in call.args else None


def _inside(positions: Mapping[cst.CSTNode, CodeRange], node: cst.CSTNode, outer: cst.CSTNode) -> bool:
    a, b = positions[node], positions[outer]
    return bool((b.start.line, b.start.column) <= (a.start.line, a.start.column)
                and (a.end.line, a.end.column) <= (b.end.line, b.end.column))


def _scope(module: cst.Module, positions: Mapping[cst.CSTNode, CodeRange], line: int) -> cst.CSTNode:
    """The innermost function spanning ``line`` (the module when none)."""
    best: cst.CSTNode = module
    for node in positions:
        if isinstance(node, cst.FunctionDef) and _spans(positions[node], line):
            if best is module or _spans(positions[best], positions[node].start.line):
                best = node
    return best


def _has(node: cst.CSTNode, kinds: tuple[type[cst.CSTNode], ...]) -> bool:
    class V(cst.CSTVisitor):
        found = False

        def on_visit(self, n: cst.CSTNode) -> bool:
            if isinstance(n, kinds):
                V.found = True
            return not V.found

    node.visit(V())
    return V.found


def _header_end(body: Sequence[cst.BaseStatement]) -> int:
    """Index of the first statement after the docstring and the ``from __future__`` imports."""
    at = 0
    for i, stmt in enumerate(body):
        if isinstance(stmt, cst.SimpleStatementLine) and (
                (i == 0 and isinstance(stmt.body[0], cst.Expr) and isinstance(stmt.body[0].value, cst.SimpleString))
                or isinstance(stmt.body[0], cst.ImportFrom) and _code(stmt.body[0].module or cst.Name("x")) == "__future__"):
            at = i + 1
            continue
        break
    return at


def _insert_top(module: cst.Module, new: list[cst.BaseStatement], at: int | None = None) -> str:
    """``new`` statements after the docstring and the ``from __future__`` imports."""
    body = list(module.body)
    at = _header_end(body) if at is None else at
    if at == 0 and body:  # a header comment (shebang, licence) stays above what is added
        first = body[0]
        new[0] = new[0].with_changes(leading_lines=first.leading_lines)
        body[0] = first.with_changes(leading_lines=[])
    return module.with_changes(body=body[:at] + new + body[at:]).code
