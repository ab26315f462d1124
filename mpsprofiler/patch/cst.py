"""The edits themselves: one change at one line of the user's source, through libcst.

libcst keeps every byte it is not asked to change (comments, blank lines, the user's
spacing and line breaks), so a patch is the fix and nothing else, which a regex over text
or ``ast.unparse`` cannot promise. Each function takes the source text and returns the
new text, or raises :class:`NotFound` with the reason when the construct is not at the
line the finding names: the caller reports "not patched" instead of guessing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import libcst as cst
from libcst.metadata import (
    Assignment,
    BuiltinScope,
    CodeRange,
    GlobalScope,
    MetadataWrapper,
    ParentNodeProvider,
    PositionProvider,
    ScopeProvider,
)


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


# -- calls ----------------------------------------------------------------------------
def find_call(module: cst.Module, line: int, names: Sequence[str]) -> cst.Call:
    calls = _innermost(module, line, lambda n: isinstance(n, cst.Call) and call_name(n) in names)
    if not calls:
        raise NotFound(f"no {'/'.join(names)}(...) call at line {line}")
    call = calls[0]
    assert isinstance(call, cst.Call)
    return call


def set_keywords(source: str, line: int, names: Sequence[str], changes: dict[str, str],
                 positional: Sequence[str] = ()) -> str:
    """The call to ``names`` spanning ``line`` with the keyword ``changes`` (name -> source
    text of the value): an argument written is replaced in place (by keyword, or by position
    where ``positional``, the callee's positional parameters in order, says it is that one),
    a new one is appended in the call's own style (one per line when the call is written one
    per line), each comment staying on the line of the argument it follows."""
    module = _parse(source)
    call = find_call(module, line, names)
    args = list(call.args)
    plain = 0  # the leading arguments given by position (before any *args or keyword)
    while plain < len(args) and args[plain].keyword is None and not args[plain].star:
        plain += 1
    starred = next((a for a in args if a.star == "*"), None)
    written = {a.keyword.value for a in args if a.keyword is not None}
    for k in changes:
        if k not in positional or k in written:
            continue
        at = positional.index(k)
        if at < plain:  # ``DataLoader(ds, 16, True, None, None, 0)``: num_workers is the 6th
            args[at] = args[at].with_changes(value=_expr(changes[k]))
            written.add(k)
        elif starred is not None:
            raise NotFound(f"the {call_name(call)}(...) call at line {line} passes arguments through "
                           f"*{_code(starred.value)}, which may hold {k} already (a keyword would then be a "
                           "TypeError)")
    args = [a.with_changes(value=_expr(changes[a.keyword.value])) if a.keyword is not None
            and a.keyword.value in changes else a for a in args]
    spread = [i for i, a in enumerate(args) if a.star == "**"]
    if spread and set(changes) - written:
        # ``DataLoader(ds, **train_kwargs)`` (pytorch/examples mnist): the dict may hold the
        # argument already (an explicit keyword would then be a TypeError), so the values
        # are merged over it, where they win whatever it holds
        i = spread[-1]
        extra = ", ".join(f'"{k}": {v}' for k, v in changes.items() if k not in written)
        args[i] = args[i].with_changes(value=_expr("{**" + _code(args[i].value) + ", " + extra + "}"))
        return _replace(module, call, call.with_changes(args=args))
    new = [cst.Arg(value=_expr(changes[k]), keyword=cst.Name(k),
                   equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                         whitespace_after=cst.SimpleWhitespace("")))
           for k in changes if k not in written]
    if new:
        args = _append(call, args, new)
    return _replace(module, call, call.with_changes(args=args))


def _append(call: cst.Call, args: list[cst.Arg], new: list[cst.Arg]) -> list[cst.Arg]:
    """``args`` with ``new`` after the last, in the call's style. The line break after the
    last argument (with its comment: ``batch_size=4,  # small``) stays after that argument;
    the new ones go on lines of their own at the arguments' indent, and the call's own
    ending (trailing comma, the line break before ``)``) moves after the last new one."""
    empty = cst.SimpleWhitespace("")
    if not args:
        sep = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        return [*(a.with_changes(comma=sep) for a in new[:-1]), new[-1]]
    last = args[-1]
    comma, after = last.comma, last.whitespace_after_arg
    before = comma.whitespace_before if isinstance(comma, cst.Comma) else empty
    brk = (comma.whitespace_after if isinstance(comma, cst.Comma)
           and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace) else after
           if isinstance(after, cst.ParenthesizedWhitespace) else None)
    if brk is None:  # the arguments end on one line: ", " between, the call's ending after the last
        sep = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        out = [*args[:-1], last.with_changes(comma=sep.with_changes(whitespace_before=before),
                                              whitespace_after_arg=empty)]
        out += [a.with_changes(comma=sep) for a in new[:-1]]
        return [*out, new[-1].with_changes(comma=comma, whitespace_after_arg=after)]
    indent = _arguments_indent(call, args, brk)

    def line_break(first: cst.TrailingWhitespace) -> cst.ParenthesizedWhitespace:
        return cst.ParenthesizedWhitespace(first_line=first, empty_lines=[], indent=indent.indent,
                                           last_line=indent.last_line)

    head = cst.Comma(whitespace_before=before, whitespace_after=cst.ParenthesizedWhitespace(
        first_line=brk.first_line, empty_lines=brk.empty_lines, indent=indent.indent, last_line=indent.last_line))
    closing = cst.ParenthesizedWhitespace(first_line=cst.TrailingWhitespace(newline=brk.first_line.newline),
                                          empty_lines=[], indent=brk.indent, last_line=brk.last_line)
    out = [*args[:-1], last.with_changes(comma=head, whitespace_after_arg=empty if brk is after else after)]
    out += [a.with_changes(comma=cst.Comma(whitespace_after=line_break(cst.TrailingWhitespace()))) for a in new[:-1]]
    if isinstance(comma, cst.Comma):  # a trailing comma written: kept, the line break after it
        return [*out, new[-1].with_changes(comma=cst.Comma(whitespace_after=closing))]
    return [*out, new[-1].with_changes(whitespace_after_arg=closing)]


def _arguments_indent(call: cst.Call, args: list[cst.Arg], brk: cst.ParenthesizedWhitespace
                      ) -> cst.ParenthesizedWhitespace:
    """Where the call's arguments start their lines: after ``(`` or an earlier argument's
    line break, else one level (4 spaces) deeper than the closing ``)``."""
    found: list[cst.BaseParenthesizableWhitespace] = [call.whitespace_before_args]
    for a in args[:-1]:
        found += [a.comma.whitespace_after if isinstance(a.comma, cst.Comma) else a.whitespace_after_arg,
                  a.whitespace_after_arg]
    for ws in reversed(found):
        if isinstance(ws, cst.ParenthesizedWhitespace):
            return ws
    return brk.with_changes(last_line=cst.SimpleWhitespace(brk.last_line.value + "    "))


def set_first_argument(source: str, line: int, names: Sequence[str], value: str) -> str:
    """``set_num_threads(16)`` -> ``set_num_threads(N)``: the call's first argument replaced."""
    module = _parse(source)
    call = find_call(module, line, names)
    if not call.args or call.args[0].star:
        raise NotFound(f"the {call_name(call)}(...) call at line {line} has no plain first argument")
    args = [call.args[0].with_changes(value=_expr(value)), *call.args[1:]]
    return _replace(module, call, call.with_changes(args=args))


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


# -- statements -------------------------------------------------------------------------
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


def augassign_item(source: str, line: int) -> str:
    """``total += loss`` -> ``total += loss.item()`` (a number, no autograd graph kept), or
    ``total += loss.detach()`` where ``total`` is used as a tensor later (``total.item()``,
    passed to a function): see :func:`accumulator_method`."""
    return augassign_detached(source, line)[0]


def augassign_detached(source: str, line: int) -> tuple[str, str]:
    """(the text, the method added: ``item`` or ``detach``) for the ``x += value`` at ``line``."""
    module = _parse(source)
    stmt = _statement(module, line)
    aug = [s for s in stmt.body if isinstance(s, cst.AugAssign)]
    if len(aug) != 1:
        raise NotFound(f"line {line} is not one `x += value` statement")
    value = aug[0].value
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in (
            "item", "detach"):
        raise NotFound(f"line {line} already adds a value without its graph (.{value.func.attr.value}())")
    method = accumulator_method(module, aug[0])
    return _replace(module, aug[0], aug[0].with_changes(value=_method(value, method))), method


AUTOGRAD = frozenset({"backward", "grad", "grad_fn", "requires_grad", "requires_grad_", "retain_grad",
                      "register_hook", "is_leaf", "retains_grad"})
"""Attributes of a tensor that only its autograd graph gives meaning to."""
NUMBER_OK = frozenset({"float", "int", "round", "print", "str", "repr", "format", "abs", "bool"})
"""Builtins that take a Python number as they take a one-element tensor."""


def accumulator_method(module: cst.Module, aug: cst.AugAssign) -> str:
    """``item`` when every use of the accumulated name takes a Python number as well as the
    tensor (``float(total)``, ``print(total)``, ``f"{total / n:.3f}"``, a comparison), else
    ``detach`` (still a tensor, without the graph: ``total.item()``, ``total.to(...)``, passed
    to a function). Refused (NotFound) where the name's graph is used (``total.backward()``,
    ``torch.autograd.grad(total, ...)``): dropping it may be the wrong fix."""
    target = _code(aug.target).replace(" ", "")
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    parents = wrapper.resolve(ParentNodeProvider)
    positions = wrapper.resolve(PositionProvider)
    uses = [n for n in parents if isinstance(n, (cst.Name, cst.Attribute, cst.Subscript))
            and _code(n).replace(" ", "") == target and not _is_attr_name(n, parents)]
    number = isinstance(aug.target, cst.Name)  # an attribute or item may be read anywhere (other files)
    for use in uses:
        parent = parents.get(use)
        if isinstance(parent, (cst.AugAssign, cst.AssignTarget)) and _is_target(parent, use):
            continue  # ``total += ...``, ``total = 0.0``: written, not read
        where = f"line {positions[use].start.line}" if use in positions else "elsewhere"
        if isinstance(parent, cst.Attribute) and parent.value is use and parent.attr.value in AUTOGRAD:
            raise NotFound(f"`{target}` is used for autograd at {where} (`.{parent.attr.value}`): its graph "
                           "may be meant to be kept")
        call = _call_taking(use, parents)
        if call is not None and ("autograd" in _code(call.func) or call_name(call) in ("backward", "grad")):
            raise NotFound(f"`{target}` is passed to {_code(call.func)}() at {where}: its graph may be meant "
                           "to be kept")
        if number and not _takes_a_number(use, parents):
            number = False
    return "item" if number else "detach"


def _is_attr_name(node: cst.CSTNode, parents: Mapping[cst.CSTNode, cst.CSTNode]) -> bool:
    """``x.total``'s ``total``, ``f(total=1)``'s keyword: a name, not the variable."""
    parent = parents.get(node)
    return (isinstance(parent, cst.Attribute) and parent.attr is node) or (
        isinstance(parent, cst.Arg) and parent.keyword is node)


def _is_target(parent: cst.CSTNode, node: cst.CSTNode) -> bool:
    return getattr(parent, "target", None) is node


def _call_taking(node: cst.CSTNode, parents: Mapping[cst.CSTNode, cst.CSTNode]) -> cst.Call | None:
    """The call ``node`` is an argument of (None: it is not one)."""
    arg = parents.get(node)
    call = parents.get(arg) if isinstance(arg, cst.Arg) else None
    return call if isinstance(call, cst.Call) and arg in call.args else None


def _takes_a_number(node: cst.CSTNode, parents: Mapping[cst.CSTNode, cst.CSTNode]) -> bool:
    """Whether ``node``'s value could be a Python number instead of a tensor: arithmetic
    whose result goes to ``float()``/``print()``/an f-string/``str.format``/a comparison."""
    while isinstance(parents.get(node), (cst.BinaryOperation, cst.UnaryOperation)):
        node = parents[node]
    parent = parents.get(node)
    if isinstance(parent, (cst.FormattedStringExpression, cst.Comparison, cst.ComparisonTarget)):
        return True
    call = _call_taking(node, parents)
    if call is None:
        return False
    return (isinstance(call.func, cst.Name) and call.func.value in NUMBER_OK) or (
        isinstance(call.func, cst.Attribute) and (call.func.attr.value == "format" or _code(call.func.value) == "math"))


ADDS = frozenset({"append", "extend", "insert", "add", "appendleft"})


def added_value_detached(source: str, line: int) -> str:
    """``kept.append(out)`` -> ``kept.append(out.detach())``: the tensor kept, its graph not."""
    module = _parse(source)
    stmt = _statement(module, line)
    calls = [s.value for s in stmt.body if isinstance(s, cst.Expr) and isinstance(s.value, cst.Call)]
    if len(calls) != 1 or not isinstance(calls[0].func, cst.Attribute) or calls[0].func.attr.value not in ADDS:
        raise NotFound(f"line {line} is not one `container.append(value)` call")
    call = calls[0]
    if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
        raise NotFound(f"the call at line {line} adds several values: no single rewrite fits")
    value = call.args[0].value
    if isinstance(value, (cst.Tuple, cst.List, cst.Dict)):
        raise NotFound(f"the call at line {line} adds several values: no single rewrite fits")
    return _replace(module, call, call.with_changes(args=[call.args[0].with_changes(value=_method(value, "detach"))]))


def bounded_container(source: str, name: str, maxlen: int) -> tuple[str, int]:
    """``name = []`` (or ``list()``) -> ``name = collections.deque(maxlen=N)``, with ``import
    collections`` at the top when missing; returns the text and the line it made.

    Only where a deque keeps every use's meaning but the dropped items': each use of
    ``name`` is an ``.append``/``.extend``/``.clear`` call or the iterable of a ``for``
    (see :data:`DEQUE_USES`). Anything else (a slice, ``.sort()``, ``.pop(i)``, ``+``, a
    ``len`` that counts the steps, a function it is passed to) is refused with its line."""
    module = _parse(source)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    parents = wrapper.resolve(ParentNodeProvider)
    hits: list[tuple[cst.Assign, int]] = []
    for node, pos in positions.items():
        if (isinstance(node, cst.Assign) and len(node.targets) == 1
                and _code(node.targets[0].target).replace(" ", "") == name
                and (isinstance(node.value, cst.List) and not node.value.elements
                     or isinstance(node.value, cst.Call) and _code(node.value.func) == "list" and not node.value.args)):
            hits.append((node, pos.start.line))
    if len(hits) != 1:
        raise NotFound(f"`{name}` is made {'in several places' if hits else 'nowhere'} as an empty list "
                       "(`= []`) in this file")
    node, line = hits[0]
    made = node.targets[0].target
    for use in positions:
        if use is made or not isinstance(use, (cst.Name, cst.Attribute)) or _code(use).replace(" ", "") != name \
                or _is_attr_name(use, parents):
            continue
        why = _deque_cannot(use, parents)
        if why:
            raise NotFound(f"`{name}` {why} at line {positions[use].start.line}, which a bounded deque would "
                           "change (it keeps the last items only)")
    text = _replace(module, node, node.with_changes(value=_expr(f"collections.deque(maxlen={maxlen})")))
    return ensure_import(text, "collections"), line


DEQUE_USES = frozenset({"append", "extend", "clear"})
"""Methods a bounded deque has with the list's meaning (the items it drops are never read
by them). Iterating in a ``for`` reads the last items only, as the bound intends."""


def _deque_cannot(use: cst.CSTNode, parents: Mapping[cst.CSTNode, cst.CSTNode]) -> str | None:
    """What the code does with the container at ``use`` that a bounded deque would change
    (None: one of the uses it keeps, :data:`DEQUE_USES` or a ``for``'s iterable)."""
    parent = parents.get(use)
    if isinstance(parent, cst.Attribute) and parent.value is use:
        call = parents.get(parent)
        if parent.attr.value in DEQUE_USES and isinstance(call, cst.Call) and call.func is parent:
            return None
        return f"is used with `.{parent.attr.value}`"
    if isinstance(parent, cst.For) and parent.iter is use:
        return None
    if isinstance(parent, (cst.NameItem, cst.Global, cst.Nonlocal)):
        return None  # ``global name``
    call = _call_taking(use, parents)
    if call is not None:
        return f"is passed to {_code(call.func)}()"
    if isinstance(parent, cst.Subscript) and parent.value is use:
        return "is indexed or sliced"
    return "is used as a value (not only appended to and iterated)"


def ensure_import(source: str, name: str) -> str:
    """``import name`` after the module's docstring and ``__future__`` imports, unless the
    module imports it at top level already."""
    module = _parse(source)
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for s in stmt.body:
                if isinstance(s, cst.Import) and any(_code(a.name) == name and a.asname is None for a in s.names):
                    return source
    return _insert_top(module, [cst.parse_statement(f"import {name}\n")])


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


def _is_import_os(stmt: cst.BaseStatement) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Import) and any(
        _code(a.name) == "os" and a.asname is None for a in stmt.body[0].names)


def set_environ_first(source: str, values: dict[str, str]) -> str:
    """``os.environ[NAME] = "value"`` for each pair at the top of the script, before any
    import (torch reads these when MPS starts: after that a change does nothing); a top-level
    assignment of one of them already in the script gets the new value instead."""
    module = _parse(source)
    body = list(module.body)
    left = dict(values)
    for i, stmt in enumerate(body):
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            continue
        s = stmt.body[0]
        if isinstance(s, cst.Assign) and len(s.targets) == 1 and isinstance(s.targets[0].target, cst.Subscript):
            key = _code(s.targets[0].target).replace(" ", "").replace("'", '"')
            for name in list(left):
                if key == f'os.environ["{name}"]':
                    body[i] = stmt.with_changes(body=[s.with_changes(value=cst.SimpleString(f'"{left.pop(name)}"'))])
    module = module.with_changes(body=body)
    if not left:
        return module.code
    lines: list[cst.BaseStatement] = [cst.parse_statement(
        f'os.environ["{k}"] = "{v}"  # read when MPS starts: before `import torch`\n') for k, v in left.items()]
    at = _header_end(module.body)
    if at < len(module.body) and _is_import_os(module.body[at]):
        return _insert_top(module, lines, at + 1)  # ``import os`` first in the script already
    return _insert_top(module, [cst.parse_statement("import os\n"), *lines], at)


def insert_after_import(source: str, module_name: str, statement: str) -> str:
    """``statement`` right after the first top-level import that binds ``module_name``, its
    ``{name}`` the name it is bound to there (``import torch as th``: ``th``); where the
    module is only imported ``from``, ``import module_name`` is added with it (when that
    name is free in the script)."""
    module = _parse(source)
    body = list(module.body)
    for i, stmt in enumerate(body):
        bound = _binds_module(stmt, module_name)
        if bound:
            body.insert(i + 1, cst.parse_statement(statement.format(name=bound) + "\n"))
            return module.with_changes(body=body).code
    for i, stmt in enumerate(body):
        if isinstance(stmt, cst.SimpleStatementLine) and any(
                isinstance(s, cst.ImportFrom) and s.module is not None
                and _code(s.module).split(".")[0] == module_name for s in stmt.body):
            if _name_used(module, module_name):
                raise NotFound(f"the script uses the name `{module_name}` for something else than the module")
            body[i + 1:i + 1] = [cst.parse_statement(f"import {module_name}\n"),
                                 cst.parse_statement(statement.format(name=module_name) + "\n")]
            return module.with_changes(body=body).code
    raise NotFound(f"the script has no top-level `import {module_name}`")


def _binds_module(stmt: cst.BaseStatement, module_name: str) -> str | None:
    """The name ``stmt`` binds ``module_name`` to: ``import torch`` and ``import torch.nn``
    bind ``torch``, ``import torch as th`` binds ``th`` (``import torch.nn as nn``: none)."""
    if not isinstance(stmt, cst.SimpleStatementLine):
        return None
    for s in stmt.body:
        if isinstance(s, cst.Import):
            for a in s.names:
                dotted = _code(a.name)
                if a.asname is not None:
                    if dotted == module_name and isinstance(a.asname.name, cst.Name):
                        return a.asname.name.value
                elif dotted.split(".")[0] == module_name:
                    return module_name
    return None


def _name_used(module: cst.Module, name: str) -> bool:
    """Whether any scope of ``module`` binds or reads ``name``."""
    scopes = MetadataWrapper(module, unsafe_skip_copy=True).resolve(ScopeProvider)
    return any(scope is not None and (name in scope.assignments or name in scope.accesses)
               for scope in set(scopes.values()))


# -- dtypes -------------------------------------------------------------------------------
FLOAT64 = frozenset({"torch.float64", "torch.double"})
FLOAT64_MAKERS = frozenset({"normal", "standard_normal", "randn", "rand", "random", "random_sample", "uniform",
                            "linspace", "logspace", "loadtxt", "genfromtxt", "zeros", "ones", "empty", "eye",
                            "identity", "exponential", "standard_exponential", "lognormal", "gamma", "beta"})
"""NumPy functions and ``Generator`` methods whose arrays are float64 unless given a dtype."""
OTHER_MAKERS = frozenset({"integers", "randint", "random_integers", "argsort", "argmax", "argmin", "bincount"})
"""... and those whose arrays are integers."""
SAME_DTYPE = frozenset({"copy", "reshape", "ravel", "flatten", "squeeze", "transpose", "swapaxes"})
"""Array methods whose result keeps the array's dtype."""
DTYPE_METHODS = frozenset({"float", "half", "bfloat16", "double", "int", "long", "short", "bool", "byte", "char",
                           "cfloat", "cdouble", "type"})
"""Tensor methods whose result has a dtype of their own: after one, NumPy's dtype is gone."""


def _dtype_kind(node: cst.BaseExpression) -> str | None:
    """``float64`` (``np.float64``, ``"float64"``, ``float``, ``"f8"``), ``other`` (another
    dtype written out), or None (not a dtype this can read)."""
    text = _code(node).replace(" ", "").strip("'\"")
    last = text.rsplit(".", 1)[-1]
    if last in ("float64", "double", "float_", "f8", "float"):
        return "float64"
    if last.rstrip("0123456789") in ("int", "uint", "float", "bool", "complex", "long", "short", "byte", "half",
                                     "single", "intc", "intp", "bool_", "i", "u", "f", "b", "longlong"):
        return "other"
    return None


class _Kinds:
    """What ``torch.from_numpy(a)`` makes: ``float64`` where ``a`` is known to be float64,
    ``other`` where it is known not to be, None where it cannot be told from the source
    (an array read from a file, a parameter, a name bound in several places)."""

    def __init__(self, wrapper: MetadataWrapper) -> None:
        self.parents = wrapper.resolve(ParentNodeProvider)
        self.scopes = wrapper.resolve(ScopeProvider)

    def of(self, call: cst.Call) -> str | None:
        return self._array(call.args[0].value, 0) if call.args and not call.args[0].star else None

    def _array(self, expr: cst.BaseExpression, depth: int) -> str | None:
        if depth > 4:
            return None
        if isinstance(expr, cst.Call):
            dtype = next((a.value for a in expr.args if a.keyword is not None and a.keyword.value == "dtype"), None)
            if dtype is not None:
                return _dtype_kind(dtype)
            if isinstance(expr.func, cst.Attribute):
                attr = expr.func.attr.value
                if attr == "astype" and expr.args:
                    return _dtype_kind(expr.args[0].value)
                if attr in SAME_DTYPE:
                    return self._array(expr.func.value, depth + 1)
                if attr in FLOAT64_MAKERS:
                    return "float64"
                if attr in OTHER_MAKERS:
                    return "other"
            return None
        if isinstance(expr, cst.Subscript):
            return self._array(expr.value, depth + 1)
        if isinstance(expr, cst.Attribute) and expr.attr.value == "T":
            return self._array(expr.value, depth + 1)
        if isinstance(expr, cst.Name):
            value = self._only_value(expr)
            return self._array(value, depth + 1) if value is not None else None
        return None

    def _only_value(self, name: cst.Name) -> cst.BaseExpression | None:
        """The value of the one ``name = value`` that binds ``name`` (None: bound otherwise,
        or in more than one place, where which one reaches here cannot be told)."""
        scope = self.scopes.get(name)
        if scope is None:
            return None
        referents = [r for a in scope.accesses[name] if a.node is name for r in a.referents]
        if len(referents) != 1 or not isinstance(referents[0], Assignment):
            return None
        target = referents[0].node
        holder = self.parents.get(target)
        assign = self.parents.get(holder) if isinstance(holder, cst.AssignTarget) else None
        if isinstance(assign, cst.Assign) and len(assign.targets) == 1 and holder is assign.targets[0]:
            return assign.value
        return None


def _is_from_numpy(call: cst.Call) -> bool:
    return _code(call.func).replace(" ", "") in ("torch.from_numpy", "from_numpy")


def _from_numpy_calls(stmt: cst.CSTNode, parents: Mapping[cst.CSTNode, cst.CSTNode]) -> list[cst.Call]:
    """The ``torch.from_numpy`` calls in ``stmt`` whose tensor keeps NumPy's dtype (no
    ``.float()``, ``.long()``, ``.to(torch.float32)`` on it in the same expression)."""
    class Find(cst.CSTVisitor):
        found: list[cst.Call] = []

        def visit_Call(self, node: cst.Call) -> None:
            if _is_from_numpy(node) and not _gets_a_dtype(node, parents):
                Find.found.append(node)

    Find.found = []
    stmt.visit(Find())
    return Find.found


def _method_chain(node: cst.CSTNode, parents: Mapping[cst.CSTNode, cst.CSTNode]) -> list[cst.Call]:
    """The calls made on ``node``'s result in turn: ``node.to(d).cuda()`` -> [``.to(d)``, ``.cuda()``]."""
    out: list[cst.Call] = []
    while True:
        attr = parents.get(node)
        call = parents.get(attr) if isinstance(attr, cst.Attribute) and attr.value is node else None
        if not isinstance(call, cst.Call) or call.func is not attr:
            return out
        out.append(call)
        node = call


def _gets_a_dtype(node: cst.CSTNode, parents: Mapping[cst.CSTNode, cst.CSTNode]) -> bool:
    for call in _method_chain(node, parents):
        assert isinstance(call.func, cst.Attribute)
        name = call.func.attr.value
        if name in DTYPE_METHODS or name == "to" and (
                any(a.keyword is not None and a.keyword.value == "dtype" for a in call.args)
                or any(_code(a.value).replace(" ", "").startswith("torch.") and _code(a.value).rsplit(".", 1)[-1]
                       in ("float32", "float", "float16", "half", "bfloat16", "float64", "double", "int64", "long",
                           "int32", "int", "int16", "int8", "uint8", "bool") for a in call.args)):
            return True
    return False


class _Float32(cst.CSTTransformer):
    """float64 made float32 inside one statement: ``dtype=torch.float64``, ``.double()``,
    and the ``torch.from_numpy(a)`` calls ``convert`` picks -> ``torch.from_numpy(a).float()``."""

    def __init__(self, convert: Callable[[cst.Call], bool]) -> None:
        self.convert = convert
        self.changed = 0

    def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
        if _code(original).replace(" ", "") in FLOAT64:
            self.changed += 1
            return updated.with_changes(attr=cst.Name("float32"))
        return updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
        func = updated.func
        if isinstance(func, cst.Attribute) and func.attr.value == "double" and not updated.args:
            self.changed += 1
            return updated.with_changes(func=func.with_changes(attr=cst.Name("float")))
        if _is_from_numpy(original) and self.convert(original):
            self.changed += 1
            return cst.Call(func=cst.Attribute(value=updated, attr=cst.Name("float")))
        return updated


class _AlreadyFloat(cst.CSTVisitor):
    def __init__(self) -> None:
        self.found = False

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "float" and isinstance(
                node.func.value, cst.Call) and _code(node.func.value.func).replace(" ", "").endswith("from_numpy"):
            self.found = True


def _is_the_value(call: cst.Call, parents: Mapping[cst.CSTNode, cst.CSTNode]) -> bool:
    """Whether ``call`` (with the calls made on its result) is the statement's whole value
    (``x = torch.from_numpy(a).to(device)``), not an argument inside it."""
    chain = _method_chain(call, parents)
    top: cst.CSTNode = chain[-1] if chain else call
    holder = parents.get(top)
    return isinstance(holder, (cst.Assign, cst.AnnAssign, cst.Return, cst.Expr)) and getattr(holder, "value", None) is top


def float32_at(source: str, line: int) -> tuple[str, list[int]]:
    """float64 made float32 where it is made (see :class:`_Float32`): on the statement at
    ``line`` itself, else on the assignments the names it uses last got before it, in the
    same function (``x = torch.from_numpy(a)``; ``model = Net().double()``). Returns the
    text and the lines changed.

    ``torch.from_numpy`` keeps the array's dtype: only an array known to be float64 gets
    ``.float()`` (``rng.normal(...)``, ``.astype(np.float64)``), so integer labels stay
    integers. One whose dtype the source does not tell gets it only where it is the whole
    value of the statement the finding names; anywhere else the patch is refused (half
    converted, a float32 model would meet a float64 input)."""
    module = _parse(source)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    kinds = _Kinds(wrapper)
    parents = kinds.parents
    stmt = _statement(module, line)
    seen = _AlreadyFloat()
    stmt.visit(seen)
    if seen.found:
        raise NotFound(f"line {line} already converts with .float()")
    calls = _from_numpy_calls(stmt, parents)
    unknown = [c for c in calls if kinds.of(c) is None]
    if len(unknown) > 1 or unknown and not _is_the_value(unknown[0], parents):
        raise NotFound(_unknown_dtype(unknown, positions))
    picked = {id(c) for c in calls if kinds.of(c) == "float64"} | {id(c) for c in unknown}
    fixer = _Float32(lambda c: id(c) in picked)
    new = stmt.visit(fixer)
    if fixer.changed:
        assert isinstance(new, cst.SimpleStatementLine)
        return _replace(module, stmt, new), [line]
    names = {n.value for n, _ in positions.items() if isinstance(n, cst.Name)
             and _inside(positions, n, stmt)}
    scope = _scope(module, positions, line)
    last: dict[str, cst.SimpleStatementLine] = {}
    for node, pos in sorted(((n, p) for n, p in positions.items() if isinstance(n, cst.SimpleStatementLine)
                             and _inside(positions, n, scope)), key=lambda t: t[1].start.line):
        if pos.start.line >= line:
            break
        for small in node.body:
            if isinstance(small, cst.Assign):
                for t in small.targets:
                    for name in _target_names(t.target):
                        if name in names:
                            last[name] = node
    changes: dict[cst.SimpleStatementLine, cst.SimpleStatementLine] = {}
    for node in last.values():
        unknown = [c for c in _from_numpy_calls(node, parents) if kinds.of(c) is None]
        if unknown:
            raise NotFound(_unknown_dtype(unknown, positions))
        fixer = _Float32(lambda c: kinds.of(c) == "float64")
        new = node.visit(fixer)
        if fixer.changed and isinstance(new, cst.SimpleStatementLine):
            changes[node] = new
    if not changes:
        raise NotFound(f"line {line} and the lines that make its tensors have no float64 array in "
                       "torch.from_numpy, dtype=torch.float64 or .double() to change")
    lines = sorted(positions[n].start.line for n in changes)
    by_id = {id(old): new for old, new in changes.items()}

    class Many(cst.CSTTransformer):  # one pass: a replaced tree has new nodes, not the old ones
        def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine,
                                      updated: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
            return by_id.get(id(original), updated)

    return module.visit(Many()).code, lines


def _unknown_dtype(calls: list[cst.Call], positions: Mapping[cst.CSTNode, CodeRange]) -> str:
    where = ", ".join(f"`{_code(c.args[0].value) if c.args else '?'}` (line {positions[c].start.line})"
                      for c in calls)
    return (f"the dtype of {where} cannot be told from the source: torch.from_numpy keeps the array's dtype, "
            "and `.float()` on an integer array (labels, indices) would break the script; add `.float()` where "
            "the float64 array enters torch")


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


def _target_names(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _target_names(e.value)]
    return []


# -- the __main__ guard --------------------------------------------------------------------
def _stays(stmt: cst.BaseStatement) -> bool:
    """What a re-importing worker needs and may run: imports, definitions, constants (and a
    ``try:`` of those: ``try: import wandb`` / ``except ImportError: wandb = None``)."""
    if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
        return True
    if isinstance(stmt, cst.Try):
        blocks = [stmt.body, *(h.body for h in stmt.handlers), *(b.body for b in (stmt.orelse, stmt.finalbody) if b)]
        return all(isinstance(b, cst.IndentedBlock) and all(_stays(s) for s in b.body) for b in blocks)
    if isinstance(stmt, cst.SimpleStatementLine):
        for s in stmt.body:
            if isinstance(s, (cst.Import, cst.ImportFrom, cst.Pass)):
                continue
            if isinstance(s, cst.Expr) and isinstance(s.value, (cst.SimpleString, cst.ConcatenatedString)):
                continue
            if isinstance(s, (cst.Assign, cst.AnnAssign)) and s.value is not None and _no_calls(s.value):
                continue
            return False
        return True
    return False


def _no_calls(node: cst.CSTNode) -> bool:
    class V(cst.CSTVisitor):
        calls = 0

        def visit_Call(self, node: cst.Call) -> None:
            V.calls += 1

    node.visit(V())
    return V.calls == 0


def _has(node: cst.CSTNode, kinds: tuple[type[cst.CSTNode], ...]) -> bool:
    class V(cst.CSTVisitor):
        found = False

        def on_visit(self, n: cst.CSTNode) -> bool:
            if isinstance(n, kinds):
                V.found = True
            return not V.found

    node.visit(V())
    return V.found


DYNAMIC = frozenset({"exec", "eval", "globals", "vars", "locals", "setattr", "__import__"})
"""Calls through which top-level code may bind names no assignment shows (nanoGPT's
``exec(open('configurator.py').read())`` overrides the constants above it)."""
MODULE_NAMES = frozenset({"__name__", "__file__", "__doc__", "__spec__", "__loader__", "__package__",
                          "__builtins__", "__annotations__", "__cached__", "__path__"})


class _TopLevel:
    """For each top-level statement: the module-level names it binds and reads when it runs,
    and those its functions read later, when called (``later``)."""

    def __init__(self, module: cst.Module) -> None:
        import bisect
        import builtins

        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        positions = wrapper.resolve(PositionProvider)
        scopes = wrapper.resolve(ScopeProvider)
        body = module.body
        self.lines = [positions[s].start.line for s in body]
        starts = [(positions[s].start.line, positions[s].start.column) for s in body]
        n = len(body)
        self.binds: list[set[str]] = [set() for _ in range(n)]
        self.reads: list[set[str]] = [set() for _ in range(n)]
        self.later: list[set[str]] = [set() for _ in range(n)]
        self.bound_at: dict[str, list[tuple[int, bool]]] = {}
        """Name -> (statement, whether in a function's body) of each module-level binding."""
        self.star = [False] * n
        self.imports = [False] * n
        self.dynamic = [False] * n
        self._builtins = frozenset(dir(builtins)) | MODULE_NAMES
        bodies = [positions[node.body] for node in positions if isinstance(node, (cst.FunctionDef, cst.Lambda))]

        def where(node: cst.CSTNode) -> tuple[int, bool] | None:
            pos = positions.get(node)
            if pos is None:
                return None
            i = bisect.bisect_right(starts, (pos.start.line, pos.start.column)) - 1
            later = any((b.start.line, b.start.column) <= (pos.start.line, pos.start.column)
                        and (pos.end.line, pos.end.column) <= (b.end.line, b.end.column) for b in bodies)
            return (i, later) if i >= 0 else None

        for scope in {s for s in scopes.values() if s is not None}:
            if isinstance(scope, GlobalScope):
                for assignment in scope.assignments:
                    if isinstance(assignment, Assignment):
                        at = where(assignment.node)
                        if at is not None:
                            self.bound_at.setdefault(assignment.name, []).append(at)
                            if not at[1]:
                                self.binds[at[0]].add(assignment.name)
            for access in scope.accesses:
                node = access.node
                if not isinstance(node, cst.Name):
                    continue
                refs = list(access.referents)
                if refs and not any(isinstance(r.scope, (GlobalScope, BuiltinScope)) for r in refs):
                    continue  # a local of a function, class or comprehension
                at = where(node)
                if at is not None:
                    (self.later if at[1] else self.reads)[at[0]].add(node.value)
        for i, stmt in enumerate(body):
            self.star[i] = _has(stmt, (cst.ImportStar,))
            self.imports[i] = _has(stmt, (cst.Import, cst.ImportFrom))
            self.dynamic[i] = bool(self.reads[i] & DYNAMIC)


    def builtin(self, name: str) -> bool:
        return name in self._builtins


def has_main_guard(source: str) -> bool:
    module = _parse(source)
    return any(isinstance(s, cst.If) and "__name__" in _code(s.test) for s in module.body)


def add_main_guard(source: str) -> str:
    """The top-level code that runs the training moved under ``if __name__ == "__main__":``
    (imports, definitions and constants stay at module level: spawned workers re-import the
    script and need them, and must not start the training again).

    Code moved under the guard runs after everything that stays, so a statement after it
    stays only where that cannot change what it does: everything it reads is bound above
    it by what stays (or is a builtin), nothing it binds is bound anywhere else, and it is
    no import (which may need what the code above it did: ``sys.path``, ``os.environ``).
    A constant that cannot stay moves under the guard, in its place; a function or class
    that cannot, an import after top-level code, or a Dataset (or ``collate_fn``,
    ``worker_init_fn``) that reads a name only the guarded code binds (a spawned worker
    would not find it) is refused with its line: the guard is the user's to place."""
    module = _parse(source)
    if has_main_guard(source):
        raise NotFound("the script has an `if __name__ == \"__main__\":` guard already")
    top = _TopLevel(module)
    body = list(module.body)
    keep: list[cst.BaseStatement] = []
    move: list[cst.BaseStatement] = []
    kept: dict[str, str] = {}  # name -> what binds it above the guard ("import", "def", "value")
    kept_at: set[int] = set()
    moved_at: set[int] = set()
    star = dynamic = False
    for i, stmt in enumerate(body):
        why = None
        if moved_at and _stays(stmt):
            why = _cannot_stay(top, i, kept, kept_at, star, dynamic)
            if why is not None and (isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) or top.imports[i]):
                raise NotFound(f"line {top.lines[i]} comes after top-level code (line {top.lines[min(moved_at)]}) "
                               f"and cannot stay above the guard ({why}), nor go under it (spawned workers need it)")
        if _stays(stmt) and why is None:
            keep.append(stmt)
            kept_at.add(i)
            kind = "def" if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) else "import" if top.imports[i] else "value"
            kept.update((name, kind) for name in top.binds[i])
            star = star or top.star[i]
        else:
            move.append(stmt)
            moved_at.add(i)
            dynamic = dynamic or top.dynamic[i]
    if not move:
        raise NotFound("no top-level code to guard (the training runs elsewhere)")
    for i in sorted(kept_at):
        _worker_reads(module, top, i, moved_at)
    for at, moved in enumerate(move):  # a blank line under the guard gets no indent (no trailing spaces)
        if isinstance(moved, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            move[at] = moved.with_changes(leading_lines=[
                ln if ln.comment is not None else ln.with_changes(indent=False)
                for ln in moved.leading_lines if at or ln.comment is not None])
    guard = cst.If(test=_expr('__name__ == "__main__"'), body=cst.IndentedBlock(body=move),
                   leading_lines=[cst.EmptyLine(), cst.EmptyLine()] if keep else [])
    return module.with_changes(body=[*keep, guard]).code


def _cannot_stay(top: _TopLevel, i: int, kept: Mapping[str, str], kept_at: set[int], star: bool,
                 dynamic: bool) -> str | None:
    """Why statement ``i``, after code that moves under the guard, cannot run before that
    code (None: it can)."""
    if top.imports[i]:
        return "an import may need what that code does first: sys.path, os.environ"
    for name in sorted(top.reads[i]):
        bound = top.bound_at.get(name, [])
        if not bound:
            if top.builtin(name) or star:
                continue
            return f"it reads `{name}`, which no statement above it binds"
        if any(later or at not in kept_at for at, later in bound):
            return f"it reads `{name}`, which the code moved under the guard binds or may change"
        if dynamic and kept.get(name) == "value":
            return f"it reads `{name}`, which the top-level code above it may change (exec, globals())"
    for name in sorted(top.binds[i]):
        if top.builtin(name) or any(at != i for at, _ in top.bound_at.get(name, [])):
            return f"`{name}` is bound elsewhere too, so running it earlier would change which value wins"
    return None


WORKER_KEYWORDS = frozenset({"collate_fn", "worker_init_fn"})


def _worker_reads(module: cst.Module, top: _TopLevel, i: int, moved_at: set[int]) -> None:
    """Refuse when a kept Dataset/Sampler class (or a function passed as ``collate_fn`` or
    ``worker_init_fn``) reads, when called, a name bound only under the guard or in a
    function's body: in a spawned worker, which re-imports the script, it is not there."""
    stmt = module.body[i]
    if isinstance(stmt, cst.ClassDef):
        bases = " ".join(_code(b.value) for b in stmt.bases)
        methods = {s.name.value for s in stmt.body.body if isinstance(s, cst.FunctionDef)}
        if not ("Dataset" in bases or "Sampler" in bases or methods & {"__getitem__", "__iter__"}):
            return
    elif isinstance(stmt, cst.FunctionDef):
        if not _passed_as(module, stmt.name.value, WORKER_KEYWORDS):
            return
    else:
        return
    for name in sorted(top.later[i]):
        bound = top.bound_at.get(name, [])
        if any(later or at in moved_at for at, later in bound):
            raise NotFound(f"`{stmt.name.value}` (line {top.lines[i]}) reads `{name}`, which only the code going under "
                           "the guard (or a function's body) binds: DataLoader workers started by spawn re-import "
                           "the script and would not find it")


def _passed_as(module: cst.Module, name: str, keywords: frozenset[str]) -> bool:
    class V(cst.CSTVisitor):
        found = False

        def visit_Arg(self, node: cst.Arg) -> None:
            if node.keyword is not None and node.keyword.value in keywords and _code(node.value) == name:
                V.found = True

    module.visit(V())
    return V.found
