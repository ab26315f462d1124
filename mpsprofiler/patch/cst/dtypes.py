"""float64 made float32 where it is made: ``dtype=torch.float64``, ``.double()``,
``torch.from_numpy(a)`` of an array known to be float64.

Apart from the other edits because it needs a small dtype inference over the source
(which NumPy calls make float64 arrays, which names are bound once), so that integer
labels stay integers and an array whose dtype the source does not tell is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import libcst as cst
from libcst.metadata import (
    Assignment,
    CodeRange,
    MetadataWrapper,
    ParentNodeProvider,
    PositionProvider,
    ScopeProvider,
)

from .nodes import NotFound, _code, _inside, _parse, _scope, _statement

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


def float32_at(source: str, line: int, also: Iterable[int] = ()) -> tuple[str, list[int], list[str]]:
    """float64 made float32 where it is made (see :class:`_Float32`): on the statement at
    ``line`` itself, on the assignments the names it uses last got before it, in the same
    function (``x = torch.from_numpy(a)``; ``model = Net().double()``), and on the
    statements at ``also`` (the script's other float64 makers the finding names). Returns
    the text, the lines changed, and a sentence per statement left as it was and why.

    All of them, not the line alone: ``stats = 0.99 * stats + 0.01 * w.double().mean(0)``
    made float32 still adds the float64 ``stats`` that ``torch.from_numpy(np.zeros(65))``
    made, and float64 wins the type promotion, so a Mac would still raise there.

    ``torch.from_numpy`` keeps the array's dtype: only an array known to be float64 gets
    ``.float()`` (``rng.normal(...)``, ``.astype(np.float64)``), so integer labels stay
    integers. One whose dtype the source does not tell gets it only where it is the whole
    value of the statement the finding names; anywhere else that statement is left as it
    was and said (half converted, a float32 model would meet a float64 input), and the
    patch is refused when nothing else is left to change."""
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
    changes: dict[int, tuple[cst.SimpleStatementLine, cst.SimpleStatementLine]] = {}
    if fixer.changed and isinstance(new, cst.SimpleStatementLine):
        changes[id(stmt)] = (stmt, new)
    refused: list[str] = []
    origins = list(_origins(module, positions, stmt, line).values())
    for node in origins + _others(module, also):
        if id(node) in changes:
            continue
        unknown = [c for c in _from_numpy_calls(node, parents) if kinds.of(c) is None]
        if unknown:
            if not changes and node in origins:
                raise NotFound(_unknown_dtype(unknown, positions))
            refused.append(f"line {positions[node].start.line}: {_unknown_dtype(unknown, positions)}")
            continue
        fixer = _Float32(lambda c: kinds.of(c) == "float64")
        new = node.visit(fixer)
        if fixer.changed and isinstance(new, cst.SimpleStatementLine):
            changes[id(node)] = (node, new)
    if not changes:
        raise NotFound(f"line {line} and the lines that make its tensors have no float64 array in "
                       "torch.from_numpy, dtype=torch.float64 or .double() to change")
    lines = sorted(positions[old].start.line for old, _ in changes.values())
    by_id = {key: new for key, (_, new) in changes.items()}

    class Many(cst.CSTTransformer):  # one pass: a replaced tree has new nodes, not the old ones
        def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine,
                                      updated: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
            return by_id.get(id(original), updated)

    return module.visit(Many()).code, lines, refused


def _origins(module: cst.Module, positions: Mapping[cst.CSTNode, CodeRange], stmt: cst.SimpleStatementLine,
             line: int) -> dict[str, cst.SimpleStatementLine]:
    """The assignments the names ``stmt`` uses last got before ``line``, in the same function
    (name -> statement): where the tensors it computes with were made."""
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
    return last


def _others(module: cst.Module, lines: Iterable[int]) -> list[cst.SimpleStatementLine]:
    """The simple statements at ``lines`` (a line that holds none any more is skipped)."""
    out = []
    for at in lines:
        try:
            out.append(_statement(module, at))
        except NotFound:
            continue
    return out


def _unknown_dtype(calls: list[cst.Call], positions: Mapping[cst.CSTNode, CodeRange]) -> str:
    where = ", ".join(f"`{_code(c.args[0].value) if c.args else '?'}` (line {positions[c].start.line})"
                      for c in calls)
    return (f"the dtype of {where} cannot be told from the source: torch.from_numpy keeps the array's dtype, "
            "and `.float()` on an integer array (labels, indices) would break the script; add `.float()` where "
            "the float64 array enters torch")


def _target_names(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _target_names(e.value)]
    return []
