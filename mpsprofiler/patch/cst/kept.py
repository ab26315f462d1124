"""Edits that stop a training loop keeping what it no longer needs: ``total += loss`` ->
``loss.item()``/``.detach()``, ``kept.append(out)`` -> ``out.detach()``, a growing list
bounded as a deque.

Each checks every use of the name it changes first (a graph used for autograd, a list
sliced or counted) and refuses with the line of the use that forbids the rewrite: these
are the edits that could change what the script computes, so they say why not instead.
"""

from __future__ import annotations

from collections.abc import Mapping

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

from .imports import ensure_import
from .nodes import (
    NotFound,
    _call_taking,
    _code,
    _expr,
    _is_attr_name,
    _method,
    _parse,
    _replace,
    _statement,
    call_name,
)


def augassign_item(source: str, line: int) -> str:
    """``total += loss`` -> ``total += loss.item()`` (a number, no autograd graph kept), or
    ``total += loss.detach()`` where ``total`` is used as a tensor later (``total.item()``,
    passed to a function): see :func:`accumulator_method`."""
    return augassign_detached(source, line)[0]


def augassign_detached(source: str, line: int) -> tuple[str, str]:
    """(the text, the method added: ``item`` or ``detach``) for the accumulation at ``line``:
    ``x += value`` -> ``x += value.item()``, or an assignment whose value reads ``x`` (``x = x +
    loss``, an average ``x = 0.98 * x + 0.02 * loss``, ``x = loss if x is None else ...``)
    -> ``x = (value).item()``: what is kept each step is then the number (or a tensor
    without history), whatever the expression."""
    module = _parse(source)
    stmt = _statement(module, line)
    aug = [s for s in stmt.body if isinstance(s, cst.AugAssign)]
    if len(aug) == 1:
        node: cst.AugAssign | cst.Assign = aug[0]
        target: cst.BaseExpression = aug[0].target
    else:
        assigns = [s for s in stmt.body if isinstance(s, cst.Assign) and len(s.targets) == 1
                   and _reads(s.value, _code(s.targets[0].target))]
        if len(assigns) != 1:
            raise NotFound(f"line {line} is not one `x += value` or `x = <expression of x>` statement")
        node, target = assigns[0], assigns[0].targets[0].target
    value = node.value
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in (
            "item", "detach"):
        raise NotFound(f"line {line} already adds a value without its graph (.{value.func.attr.value}())")
    method = accumulator_method(module, target)
    return _replace(module, node, node.with_changes(value=_method(value, method))), method


def _reads(value: cst.BaseExpression, target: str) -> bool:
    """Whether the expression reads what it is assigned to (an accumulation): the name, or
    the attribute or entry (``stats["loss"] = stats["loss"] + loss``), spaces aside."""
    found: list[bool] = []
    target = target.replace(" ", "")

    class Reads(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            if node.value == target:
                found.append(True)

        def visit_Attribute(self, node: cst.Attribute) -> None:
            if _code(node).replace(" ", "") == target:
                found.append(True)

        def visit_Subscript(self, node: cst.Subscript) -> None:
            if _code(node).replace(" ", "") == target:
                found.append(True)

    value.visit(Reads())
    return bool(found)


AUTOGRAD = frozenset({"backward", "grad", "grad_fn", "requires_grad", "requires_grad_", "retain_grad",
                      "register_hook", "is_leaf", "retains_grad"})
"""Attributes of a tensor that only its autograd graph gives meaning to."""

NUMBER_OK = frozenset({"float", "int", "round", "print", "str", "repr", "format", "abs", "bool"})
"""Builtins that take a Python number as they take a one-element tensor."""


def accumulator_method(module: cst.Module, accumulated: cst.BaseExpression) -> str:
    """``item`` when every use of the accumulated name takes a Python number as well as the
    tensor (``float(total)``, ``print(total)``, ``f"{total / n:.3f}"``, a comparison), else
    ``detach`` (still a tensor, without the graph: ``total.item()``, ``total.to(...)``, passed
    to a function). Refused (NotFound) where the name's graph is used (``total.backward()``,
    ``torch.autograd.grad(total, ...)``): dropping it may be the wrong fix."""
    target = _code(accumulated).replace(" ", "")
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    parents = wrapper.resolve(ParentNodeProvider)
    positions = wrapper.resolve(PositionProvider)
    uses = [n for n in parents if isinstance(n, (cst.Name, cst.Attribute, cst.Subscript))
            and _code(n).replace(" ", "") == target and not _is_attr_name(n, parents)]
    number = isinstance(accumulated, cst.Name)  # an attribute or item may be read anywhere (other files)
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


def _is_target(parent: cst.CSTNode, node: cst.CSTNode) -> bool:
    return getattr(parent, "target", None) is node


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


NUMBERS_TAKE = frozenset({"len", "sum", "min", "max", "sorted", "list", "tuple", "print", "str", "repr", "mean",
                          "fmean", "median", "stdev", "pstdev", "variance", "fsum", "array", "asarray", "dump",
                          "dumps", "savetxt", "tensor", "as_tensor"})
"""Calls that take a list of Python numbers as they take a list of one-element tensors
(``len``, ``sum``, ``statistics.mean``, ``np.array``, ``json.dump``, ``torch.tensor``)."""
NUMBER_LISTS_TAKE = frozenset({"len", "list", "tuple", "print", "str", "repr", "array", "asarray", "dump", "dumps",
                               "tensor", "as_tensor"})
"""... and those that take a list of ``.tolist()`` lists as they take a list of small tensors."""
KEEPS = frozenset({"append", "extend", "insert", "add", "appendleft", "clear"})


def added_value_number(source: str, line: int, holder: str, method: str) -> str:
    """``curve.append(loss)`` -> ``curve.append(loss.item())`` (``method``: ``item`` for
    one-element tensors, ``tolist`` for other small ones): every value is kept, as a number,
    where a bounded deque would drop all but the last ones. Only where every use of
    ``holder`` in the file reads numbers as it reads tensors (its length, adding, clearing,
    ``sum``/``print``/``np.array``/``json.dump``, an f-string: :data:`NUMBERS_TAKE`);
    anything else (``torch.stack``, a tensor method on an item, iterating) is refused with
    its line. An attribute (``self.curve``) is matched by its name on any object of the file
    (a callback's ``self.curve`` is read as ``cb.curve``)."""
    module = _parse(source)
    stmt = _statement(module, line)
    calls = [s.value for s in stmt.body if isinstance(s, cst.Expr) and isinstance(s.value, cst.Call)]
    if len(calls) != 1 or not isinstance(calls[0].func, cst.Attribute) or calls[0].func.attr.value not in ADDS \
            or _code(calls[0].func.value).replace(" ", "") != holder.replace(" ", ""):
        raise NotFound(f"line {line} is not one `{holder}.append(value)` call")
    call = calls[0]
    if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star \
            or isinstance(call.args[0].value, (cst.Tuple, cst.List, cst.Dict)):
        raise NotFound(f"the call at line {line} adds several values: no single rewrite fits")
    value = call.args[0].value
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in (
            "item", "tolist"):
        raise NotFound(f"line {line} already keeps a number (.{value.func.attr.value}())")
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    parents = wrapper.resolve(ParentNodeProvider)
    positions = wrapper.resolve(PositionProvider)
    takes = NUMBERS_TAKE if method == "item" else NUMBER_LISTS_TAKE
    for use in _container_uses(positions, parents, holder):
        why = _number_cannot(use, parents, takes)
        if why:
            raise NotFound(f"`{_code(use)}` {why} at line {positions[use].start.line}, which would then get "
                           f"numbers (.{method}()), not tensors")
    return _replace(module, call, call.with_changes(args=[call.args[0].with_changes(value=_method(value, method))]))


def _container_uses(positions: Mapping[cst.CSTNode, object], parents: Mapping[cst.CSTNode, cst.CSTNode],
                    holder: str) -> list[cst.BaseExpression]:
    """Every place of the file that may be ``holder``: the name (not an attribute's name),
    or, for an attribute, that attribute on any object (``self.curve``, ``cb.curve``)."""
    name = holder.replace(" ", "")
    attr = name.rsplit(".", 1)[1] if "." in name else None
    out: list[cst.BaseExpression] = []
    for node in positions:
        if attr is not None and isinstance(node, cst.Attribute) and node.attr.value == attr:
            out.append(node)
        elif attr is None and isinstance(node, cst.Name) and node.value == name and not _is_attr_name(node, parents):
            out.append(node)
    return out


def _number_cannot(use: cst.CSTNode, parents: Mapping[cst.CSTNode, cst.CSTNode], takes: frozenset[str]) -> str | None:
    """What the code does with the container at ``use`` that needs tensors in it (None:
    numbers serve as well: see :func:`added_value_number`)."""
    parent = parents.get(use)
    if isinstance(parent, cst.AssignTarget) or isinstance(parent, (cst.AugAssign, cst.AnnAssign)) \
            and _is_target(parent, use):
        return None  # ``self.curve = []``: written, not read
    if isinstance(parent, (cst.NameItem, cst.Global, cst.Nonlocal, cst.FormattedStringExpression)):
        return None
    if isinstance(parent, cst.Attribute) and parent.value is use:
        called = parents.get(parent)
        if parent.attr.value in KEEPS and isinstance(called, cst.Call) and called.func is parent:
            return None
        return f"is used with `.{parent.attr.value}`"
    call = _call_taking(use, parents)
    if call is not None:
        func = _code(call.func).replace(" ", "")
        if call_name(call) in takes and (not func.startswith("torch.") or call_name(call) in ("tensor", "as_tensor")):
            return None
        return f"is passed to {func}()"
    if isinstance(parent, cst.For) and parent.iter is use:
        return "is iterated"
    if isinstance(parent, cst.Subscript) and parent.value is use:
        return "is indexed or sliced"
    return "is used as a value"


def keyed_value_bounded(source: str, line: int, holder: str, maxlen: int, detach: bool) -> str:
    """``cache[step] = h`` -> ``cache[step] = h.detach()`` (``detach``: its graph is kept too)
    followed by a loop that drops the oldest keys past ``maxlen`` (dicts keep insertion
    order). A dict that gains a key every step keeps every step's tensor, graph or not: the
    ``.detach()`` alone left an unseen script's memory growing as fast (334 -> 498 MiB in 512
    steps, 338 -> 489 MiB without it)."""
    module = _parse(source)
    stmt, assign = _key_set(module, line, holder)
    if isinstance(assign.value, (cst.Tuple, cst.List, cst.Dict)):
        raise NotFound(f"the statement at line {line} keeps several values: no single rewrite fits")
    value = _method(assign.value, "detach") if detach else assign.value
    kept = stmt.with_changes(body=[assign.with_changes(value=value)])
    drop = cst.parse_statement(f"while len({holder}) > {maxlen}:  # a new key every step: keep the newest {maxlen}\n"
                               f"    {holder}.pop(next(iter({holder})))\n")
    return _replace(module, stmt, cst.FlattenSentinel([kept, drop]))  # type: ignore[arg-type]


def sets_a_key(source: str, line: int, holder: str) -> bool:
    """Whether the statement at ``line`` is ``holder[key] = value`` (see :func:`keyed_value_bounded`)."""
    try:
        _key_set(_parse(source), line, holder)
    except NotFound:
        return False
    return True


def _key_set(module: cst.Module, line: int, holder: str) -> tuple[cst.SimpleStatementLine, cst.Assign]:
    stmt = _statement(module, line)
    assigns = [s for s in stmt.body if isinstance(s, cst.Assign)]
    if len(stmt.body) != 1 or len(assigns) != 1 or len(assigns[0].targets) != 1:
        raise NotFound(f"line {line} is not one `container[key] = value` statement")
    target = assigns[0].targets[0].target
    if not isinstance(target, cst.Subscript) or _code(target.value).replace(" ", "") != holder.replace(" ", ""):
        raise NotFound(f"line {line} does not set a key of `{holder}`")
    return stmt, assigns[0]


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
    for use in _container_uses(positions, parents, name):  # a callback's `self.curve` is read as `cb.curve`
        if use is made:
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
