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
    """KiB per step the container grows by, or None: its tensors' bytes measured at two
    checks where the probe measured them (items added between the sampled steps, such as
    an evaluation pass's of another batch size, counted at their own size), else items
    added per step x the sampled steps' KiB per item."""
    steps = site.holder_step - site.holder_step0
    grown = getattr(site, "holder_bytes", 0) - getattr(site, "holder_bytes0", 0)
    if steps > 0 and getattr(site, "holder_bytes0", 0) > 0 and grown > 0:
        return float(grown / steps / 1024.0)
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
    new = _rewritten(source, stmt, site.grad, site.holder, scalar=getattr(site, "scalar", False),
                     numbers=number_safe(tree, site.holder))
    if new is None:
        return {}
    out = {"leak_site_fix_code": new, **number_fix(source, tree, stmt, site)}
    if isinstance(stmt, ast.Assign):  # `cache[step] = h`: bounded where the key is set
        return out
    lines = [new]
    if not deque_safe(tree, site.holder):
        return out  # a deque would break a use of the list (see deque_safe)
    keyed = _KEYED.match(site.holder)
    made_here = _setdefault_list(stmt)
    if keyed is not None and made_here is not None:  # `h.setdefault(k, []).append(x)`: bounded there
        return {**out, "leak_site_fix_code": "\n".join(lines + [
            "", f"# or keep only the last {KEEP_LAST} of each, in the same line:",
            _rewritten(source, stmt, site.grad, site.holder, made_here) or ""]).rstrip()}
    if keyed is not None:  # `history['loss']`: a list kept in a dict
        return {**out, "leak_site_fix_code": "\n".join(lines + _bounded_values(source, tree, keyed[1], site.holder,
                                                                        site.holder_line))}
    made = _creation(source, tree, site.holder, site.holder_line)
    if made is not None:
        line, text = made
        lines += ["", f"# or keep only the last {KEEP_LAST}, where `{site.holder}` is made (line {line}):",
                  f"{text.split('=', 1)[0].rstrip()} = collections.deque(maxlen={KEEP_LAST})  # import collections"]
    else:
        lines += ["", f"# or keep only the last {KEEP_LAST}: make `{site.holder}` a bounded deque where it is made",
                  f"{site.holder} = collections.deque(maxlen={KEEP_LAST})  # import collections"]
    return {**out, "leak_site_fix_code": "\n".join(lines)}


def added_line_fix(file: str, line: int, holder: str, grad: bool) -> tuple[str, str | None] | None:
    """The one-line statement at ``file:line`` that adds to ``holder`` as written (no
    comment) and rewritten to keep no graph (``preds.append(model(x).detach())``; None where
    it is not such a line); None where the file or the statement cannot be read."""
    read = read_tree(file)
    if read is None:
        return None
    source, tree = read
    stmt = next((n for n in ast.walk(tree) if isinstance(n, ast.stmt) and n.lineno == line and n.end_lineno == line),
                None)
    text = ast.get_source_segment(source, stmt) if stmt is not None else None
    if stmt is None or text is None:
        return None
    return text, _rewritten(source, stmt, grad, holder)


DEQUE_LACKS = frozenset({"sort", "__getitem__"})
"""List methods a ``collections.deque`` has not (``sort``); slicing (``x[-10:]``) is
refused by a deque too (TypeError: sequence index must be integer, not 'slice')."""
LIST_ONLY_CALLS = frozenset({"dump", "dumps", "sorted"})
"""Calls that take a list and not a deque as it is: ``json.dump(history)`` (a deque is not
JSON serializable)."""


def deque_safe(tree: ast.Module, holder: str) -> bool:
    """Whether the script uses ``holder`` only in ways a bounded ``collections.deque`` also
    takes: no slice of it, no ``.sort()``, no ``+`` of it, not handed to ``json.dump(s)``.
    The "or keep only the last N" alternative is offered only then: a deque where the script
    slices its history raises a TypeError at the first summary."""
    parents = _parents(tree)
    for node in _uses(tree, holder):
        parent = parents.get(node)
        if isinstance(parent, ast.Subscript) and parent.value is node and isinstance(parent.slice, ast.Slice):
            return False
        if isinstance(parent, ast.Attribute) and parent.value is node and parent.attr in DEQUE_LACKS:
            return False
        if isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Add):
            return False
        if isinstance(parent, ast.Call) and node in parent.args and _called(parent) in LIST_ONLY_CALLS:
            return False
    return True


_DERIVED: dict[int, tuple[ast.Module, dict[Any, Any]]] = {}
"""Per syntax tree (``read_tree`` shares one per file): its parents and the uses of each
holder. A leak's fix asks for them three times (``number_safe`` twice, ``deque_safe``),
and each walk unparsed every name of the file: 6.3 s of a report on a 33,000-line script
with one leak, for the same answers."""


def _derived(tree: ast.Module) -> dict[Any, Any]:
    entry = _DERIVED.get(id(tree))
    if entry is None or entry[0] is not tree:
        if len(_DERIVED) >= 8:
            _DERIVED.clear()
        entry = _DERIVED[id(tree)] = (tree, {})  # the tree kept: its id stays its own
    return entry[1]


def _parents(tree: ast.Module) -> dict[ast.AST, ast.AST]:
    """Each node's parent: how a use of the container is used (sliced, stacked, called on)."""
    derived = _derived(tree)
    parents: dict[ast.AST, ast.AST] | None = derived.get("parents")
    if parents is None:
        parents = derived["parents"] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                parents[child] = node
    return parents


def _uses(tree: ast.Module, holder: str) -> list[ast.expr]:
    """The script's expressions that name the container ``holder`` as the leak names it
    (``history``, ``self.outs``, ``stats['loss']``)."""
    derived = _derived(tree)
    uses: list[ast.expr] | None = derived.get(("uses", holder))
    if uses is None:
        uses = derived[("uses", holder)] = [
            node for node in ast.walk(tree)
            if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)) and _may_be(node, holder) and _is(node, holder)]
    return uses


def _may_be(node: ast.AST, holder: str) -> bool:
    """Whether ``ast.unparse(node)`` can be ``holder``, without unparsing: a name is its id,
    an attribute's text ends with ``.attr``, a subscript's with ``]``."""
    if isinstance(node, ast.Name):
        return node.id == holder
    if isinstance(node, ast.Attribute):
        return holder.endswith("." + node.attr)
    return holder.endswith("]")


JOINS = frozenset({"stack", "cat", "concat", "concatenate", "vstack", "hstack", "dstack", "column_stack",
                   "row_stack", "stack_tensors"})
"""Calls that take a sequence of tensors and refuse numbers (``torch.stack(losses[-50:])``:
TypeError, "expected Tensor as element 0")."""
NUMBER_ATTRS = frozenset({"real", "imag", "conjugate", "hex", "is_integer", "as_integer_ratio"})
"""Attributes a Python float has too: an element used through any other (``losses[-1].backward()``,
``h[0].mean()``) needs the tensor."""


def number_safe(tree: ast.Module, holder: str) -> bool:
    """Whether the script's uses of ``holder`` still work when it keeps numbers
    (``.item()``) instead of tensors: not handed, whole or sliced, to ``torch.stack``/``cat``
    and their kind, and no tensor method or attribute used on one of its elements (indexed,
    or the variable of a ``for`` over it). The ".item()" alternative is offered only then:
    a script that stacks its last 50 losses raises a TypeError at the first summary."""
    derived = _derived(tree)  # asked twice per leak (keep_fix, number_fix): one answer
    known: bool | None = derived.get(("number_safe", holder))
    if known is None:
        known = derived[("number_safe", holder)] = _number_safe(tree, holder)
    return known


def _number_safe(tree: ast.Module, holder: str) -> bool:
    parents = _parents(tree)
    elements: set[str] = set()  # names a `for` over the holder binds to its elements
    for node in _uses(tree, holder):
        use: ast.AST = node
        element = False
        parent = parents.get(use)
        while isinstance(parent, ast.Subscript) and parent.value is use:  # `h[-50:]`, `h[-1]`
            element = element or not isinstance(parent.slice, ast.Slice)
            use, parent = parent, parents.get(parent)
        if isinstance(parent, ast.Starred):
            use, parent = parent, parents.get(parent)
        if isinstance(parent, (ast.List, ast.Tuple)) and not element:  # `torch.cat([*h])`
            use, parent = parent, parents.get(parent)
        if isinstance(parent, ast.Call) and use in parent.args and _called(parent) in JOINS:
            return False
        if element and isinstance(parent, ast.Attribute) and parent.value is use and parent.attr not in NUMBER_ATTRS:
            return False
        if not element and _tensor_result(use, parents):  # `sum(h).item()`, `(sum(h) / len(h)).backward()`
            return False
        if isinstance(parent, (ast.For, ast.comprehension)) and parent.iter is use and isinstance(parent.target, ast.Name):
            elements.add(parent.target.id)
    for walked in ast.walk(tree):
        if (isinstance(walked, ast.Attribute) and isinstance(walked.value, ast.Name) and walked.value.id in elements
                and walked.attr not in NUMBER_ATTRS):
            return False
    return True


def number_fix(source: str, tree: ast.Module, stmt: ast.stmt, site: Any) -> dict[str, Any]:
    """``leak_site_number``: ``item`` with ``leak_site_item_code``, the adding line keeping a
    number (``losses.append(loss.item())``) where the kept tensors are one element each and
    the script's uses of the container take numbers (:func:`number_safe`); else ``none``."""
    none = {"leak_site_number": "none"}
    if not (site.grad and getattr(site, "scalar", False) and isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute)
            and len(stmt.value.args) == 1 and not stmt.value.keywords):
        return none
    owner, value = ast.get_source_segment(source, stmt.value.func.value), ast.get_source_segment(source, stmt.value.args[0])
    if owner is None or value is None or not number_safe(tree, site.holder):
        return none
    if not isinstance(stmt.value.args[0], (ast.Name, ast.Attribute, ast.Subscript, ast.Call)):
        value = f"({value})"
    return {"leak_site_number": "item", "leak_site_item_code": f"{owner}.{stmt.value.func.attr}({value}.item())"}


REDUCERS = frozenset({"sum", "max", "min"})
"""Builtins that give an element (or their sum) back: a tensor of tensors, a float of floats."""


def _tensor_result(use: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Whether ``use`` (the container) goes through ``sum``/``max``/``min`` and arithmetic
    into a tensor method or attribute (``sum(h).item()``), which a float has not."""
    parent = parents.get(use)
    if not (isinstance(parent, ast.Call) and use in parent.args and _called(parent) in REDUCERS):
        return False
    use, parent = parent, parents.get(parent)
    while isinstance(parent, ast.BinOp):
        use, parent = parent, parents.get(parent)
    return isinstance(parent, ast.Attribute) and parent.value is use and parent.attr not in NUMBER_ATTRS


def _is(node: ast.AST, holder: str) -> bool:
    try:
        return ast.unparse(node) == holder
    except Exception:
        return False


def _called(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


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


def _setdefault_list(stmt: ast.stmt) -> ast.expr | None:
    """The ``[]`` of ``h.setdefault(k, []).append(x)`` (a forward hook's dict of lists), or None."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Attribute)):
        return None
    owner = stmt.value.func.value
    if (isinstance(owner, ast.Call) and isinstance(owner.func, ast.Attribute) and owner.func.attr == "setdefault"
            and len(owner.args) == 2 and _makes_list(owner.args[1])):
        return owner.args[1]
    return None


def _rewritten(source: str, stmt: ast.stmt, grad: bool, holder: str, bounded: ast.expr | None = None,
               scalar: bool = False, numbers: bool = True) -> str | None:
    """The adding line rewritten; None unless it adds one tensor-like value to ``holder``
    itself (a line adding ``loss.item()``, or to another container, is not the one).
    ``bounded``: the new list of a ``setdefault`` in the line, made a bounded deque.
    ``scalar``: the kept tensors hold one element each, kept as ``.item()`` (what
    `mpsprof patch` writes), not ``.mean().item()``. ``numbers``: the script's uses of
    ``holder`` take numbers (:func:`number_safe`); where they need tensors (``a.mean()`` of
    its elements, ``torch.stack`` of it) a list keeps its tensors and is cut to the last
    ``KEEP_LAST`` after each append instead (a number broke an unseen script's
    ``torch.stack([a.mean() for a in acts[-10:]])``; a list cut in place still slices)."""
    seg = ast.get_source_segment
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        call = stmt.value
        if not isinstance(call.func, ast.Attribute) or call.func.attr not in ADDS or len(call.args) != 1:
            return None
        if not _adds_to(call.func.value, holder) or _number(call.args[0]):
            return None
        owner, value = seg(source, call.func.value), seg(source, call.args[0])
        if owner is None or value is None:
            return None
        empty = seg(source, bounded) if bounded is not None else None
        if empty is not None:
            owner = owner.replace(empty, f"collections.deque(maxlen={KEEP_LAST})", 1)
        if isinstance(call.args[0], (ast.Tuple, ast.List, ast.Dict)):
            return None  # several values: no single rewrite fits
        if not grad and not scalar and not numbers:
            if call.func.attr != "append" or empty is not None:
                return None
            return (f"{owner}.append({value})\ndel {owner}[:-{KEEP_LAST}]  # keep the last {KEEP_LAST} "
                    f"(a list still: slices and indexing work as before)")
        keep = f"{value}.detach()" if grad else f"{value}.item()" if scalar else f"{value}.mean().item()"
        why = "  # no autograd graph kept" if grad else "  # a number, not the tensor (or what you need of it)"
        if empty is not None:
            why = "  # import collections"
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


def _adds_to(owner: ast.expr, holder: str) -> bool:
    """Whether ``owner`` (what ``.append`` is called on) is ``holder``: the same text, or for
    a list kept in a dict (``activations['block0']``) the dict reached by a key the code
    computes: ``activations[name]``, ``activations.setdefault(name, [])``."""
    if ast.unparse(owner) == holder:
        return True
    keyed = _KEYED.match(holder)
    if keyed is None:
        return False
    if isinstance(owner, ast.Subscript) and not isinstance(owner.slice, ast.Constant):
        return ast.unparse(owner.value) == keyed[1]
    return (isinstance(owner, ast.Call) and isinstance(owner.func, ast.Attribute)
            and owner.func.attr in ("setdefault", "get") and ast.unparse(owner.func.value) == keyed[1])


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


def carry_fix(file: str, line: int, name: str) -> str:
    """``graph_carry_fix_code``: the script's own accumulation at ``line`` keeping its value
    without autograd history (``smooth = (0.98 * smooth + 0.02 * loss).detach()``, ``total +=
    loss.detach()``), with the number form as the other way; where the line is not one
    such statement, the two forms on ``name`` (``name += loss.item()``).

    The fix was always ``name += loss.item()``: for an exponential average that turns the
    average into a running sum. Wrapping the whole value keeps what the line computes."""
    generic = (f"{name} += loss.item()      # a Python float: one sync per step\n"
               "# or, to avoid the sync until you log:\n"
               f"{name} += loss.detach()    # a tensor without autograd history")
    read = read_tree(file)
    if read is None:
        return generic
    source, tree = read
    stmts = [n for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AugAssign)) and n.lineno == line
             and n.end_lineno == line]
    if len(stmts) != 1:
        return generic
    stmt = stmts[0]
    value = ast.get_source_segment(source, stmt.value)
    if value is None:
        return generic
    if isinstance(stmt, ast.AugAssign):
        head = ast.get_source_segment(source, stmt)
        target = ast.get_source_segment(source, stmt.target)
        if head is None or target is None or not _same_target(stmt.target, name):
            return generic
        op = head[len(target):head.index("=", len(target)) + 1].strip()
        wrapped = value if isinstance(stmt.value, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)) else f"({value})"
        return (f"{target} {op} {wrapped}.detach()   # a tensor without autograd history\n"
                + _number_way(source, tree, stmt.target, f"{target} {op} {wrapped}.item()"))
    if len(stmt.targets) != 1 or not _same_target(stmt.targets[0], name):
        return generic
    name = ast.get_source_segment(source, stmt.targets[0]) or name
    return (f"{name} = ({value}).detach()   # the same value, without autograd history\n"
            + _number_way(source, tree, stmt.targets[0], f"{name} = ({value}).item()"))


def _number_way(source: str, tree: ast.Module, target: ast.expr, line: str) -> str:
    """The number form of the carry's fix (``line``), or, where the script uses the total as
    a tensor (:func:`_tensor_use`), why not: a fast.ai-style loop's ``tot_loss += loss *
    len(xb)`` was offered ``tot_loss += (loss * len(xb)).item()``, and its epoch line
    ``(tot_loss / count).item()`` then failed (a float has no ``.item()``). ``mpsprof
    patch`` chooses ``.detach()`` there (patch/cst/kept.py, ``accumulator_method``)."""
    use = _tensor_use(source, tree, target)
    if use is None:
        return f"# or a Python float (one sync per step):\n{line}"
    return f"# (not `.item()` here: line {use[0]} uses it as a tensor, `{use[1]}`)"


def _tensor_use(source: str, tree: ast.Module, target: ast.expr) -> tuple[int, str] | None:
    """(line, code) of the first read of ``target`` that only a tensor allows: a method or an
    attribute of it, or of arithmetic on it (``total.item()``, ``(total / n).item()``,
    ``total.device``); None where every read would take a number too."""
    want = ast.unparse(target)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not isinstance(node.ctx, ast.Load):
            continue
        inner = node.value
        while isinstance(inner, (ast.BinOp, ast.UnaryOp)):
            operands = [inner.left, inner.right] if isinstance(inner, ast.BinOp) else [inner.operand]
            inner = next((o for o in operands if ast.unparse(o) == want), operands[0])
        if ast.unparse(inner) == want and isinstance(getattr(inner, "ctx", None), ast.Load):
            call = next((c for c in ast.walk(tree) if isinstance(c, ast.Call) and c.func is node), None)
            code = ast.get_source_segment(source, call if call is not None else node)
            return node.lineno, code or want
    return None


def _same_target(node: ast.expr, name: str) -> bool:
    """Whether the assigned ``node`` is ``name`` (``total``, ``self.total``, ``stats["loss"]``
    as the probe names it from the line: the same expression, quotes aside)."""
    if not isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)):
        return False
    try:
        return ast.unparse(node) == ast.unparse(ast.parse(name, mode="eval").body)
    except SyntaxError:
        return False
