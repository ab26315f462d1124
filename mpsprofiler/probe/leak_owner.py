"""The object whose attribute keeps a leaked tensor, found from the tensor's side.

The leak check looks for the container among the variables of the user frames on the
stack at a step boundary (``ops_leaks._holder_in``). A framework's loop is not such a
frame: Lightning calls ``training_step`` inside its optimizer closure, so at the step
boundary no user frame holds the LightningModule, and ``self.outs.append(logits)`` was
found nowhere (the finding named the line that made ``logits``). A Trainer subclass is a
local of ``main`` (``trainer.outs``), but the file writes ``self.outs.append``, so no
adding line was found. Here the garbage collector's referrers lead from the tensor to
the list, from the list to the object (or its ``__dict__``) and so to the user's class,
whose file has the ``self.<attr>.append(...)`` line.

The container is the one the tensor is in (found by identity); the line named is one that
can have put it there: a line of the owner's own class (its methods and its user bases':
another class of the file may add to a ``self.outs`` of its own) that adds a value which
can be this tensor (not ``loss.item()``, ``float(x)``, a literal, nor ``x.detach()`` for
a tensor that has autograd history). Where no such line, or more than one, is left, no
container is named: a wrong line is worse than none.

``gc.get_referrers`` walks every tracked object (tens of ms in a process with a
framework imported); it runs only for a tensor already found alive on two checks, and
only when the frame search named no adding line, so a clean run never pays it.
"""

from __future__ import annotations

import ast
import gc
import itertools
from collections.abc import Callable
from types import CodeType
from typing import Any

from .leak_reach import own_dict

MAX_REFERRERS = 64
"""Containers (and owners) examined per step: the first ones are the candidates."""


def _is_container(value: Any) -> bool:
    # by type, not isinstance: no __getattribute__ of the referrers runs (leak_reach)
    return issubclass(type(value), (list, dict, set)) or type(value).__name__ == "deque"


def _owners(container: Any) -> list[tuple[Any, str]]:
    """(object, attribute) pairs whose attribute is ``container``."""
    found: list[tuple[Any, str]] = []
    for ref in gc.get_referrers(container)[:MAX_REFERRERS]:
        if issubclass(type(ref), dict):
            # a materialised instance __dict__: its owner refers to it (read as leak_reach reads
            # it: an owner's own __getattribute__, a lazy proxy's, neither runs nor hides it)
            objects = [o for o in gc.get_referrers(ref)[:MAX_REFERRERS] if own_dict(o) is ref]
            attrs = [k for k, v in ref.items() if v is container and isinstance(k, str)]
            found.extend((o, a) for o in objects for a in attrs[:1])
        else:
            attrs_of = own_dict(ref)
            if attrs_of is not None and not issubclass(type(ref), type):
                found.extend((ref, k) for k, v in list(attrs_of.items()) if v is container and isinstance(k, str))
    return found


def _user_methods(obj: Any, is_user: Callable[[CodeType], bool]) -> list[CodeType]:
    """The code of the user's methods on ``obj``'s class and its bases (library classes
    are skipped: a framework's own lists are not the script's leak); a property's,
    static and class methods' too."""
    codes: list[CodeType] = []
    for cls in type(obj).__mro__:
        for value in vars(cls).values():
            functions = [getattr(value, "__func__", value)]
            if isinstance(value, property):
                functions = [value.fget, value.fset, value.fdel]
            for function in functions:
                code = getattr(function, "__code__", None)
                if isinstance(code, CodeType) and is_user(code):
                    codes.append(code)
    return codes


def _code_lines(code: CodeType) -> tuple[int, int]:
    """First and last line of a function, with the functions nested in it."""
    last = code.co_firstlineno
    todo = [code]
    while todo:
        c = todo.pop()
        last = max([last, *(ln for _, _, ln in c.co_lines() if ln)])
        todo.extend(k for k in c.co_consts if isinstance(k, CodeType))
    return code.co_firstlineno, last


_TREES: dict[str, ast.Module | None] = {}


def parsed(file: str) -> ast.Module | None:
    """``file`` parsed (None where it cannot be read or parsed), the last 16 kept."""
    if file not in _TREES:
        try:
            with open(file, encoding="utf-8") as fh:
                tree: ast.Module | None = ast.parse(fh.read())
        except Exception:
            tree = None
        if len(_TREES) >= 16:
            _TREES.clear()
        _TREES[file] = tree
    return _TREES[file]


def source_segment(lines: list[str], node: ast.AST) -> str | None:
    """The source text of ``node`` from the file's lines (``linecache.getlines``), as
    :func:`ast.get_source_segment` gives it, without splitting the whole file again at each
    call: that split made a sampled step's scan of a 400-line script's assignments cost
    ~12 ms (each of its ~10 calls re-split the file), and grows with the file's length times
    its assignments. Column offsets are UTF-8 byte offsets (:mod:`ast`)."""
    first: int | None = getattr(node, "lineno", None)
    last: int | None = getattr(node, "end_lineno", None)
    col: int | None = getattr(node, "col_offset", None)
    end_col: int | None = getattr(node, "end_col_offset", None)
    if first is None or last is None or col is None or end_col is None or not 0 < first <= last <= len(lines):
        return None
    head = lines[first - 1].encode()
    if first == last:
        return head[col:end_col].decode(errors="replace")
    tail = lines[last - 1].encode()[:end_col].decode(errors="replace")
    return head[col:].decode(errors="replace") + "".join(lines[first:last - 1]) + tail


NOT_TENSORS = frozenset({"item", "tolist", "numpy", "float", "int", "bool", "str", "len", "round", "repr"})
"""Calls whose result is no tensor: ``loss.item()``, ``float(loss)``, ``len(batch)``."""
PLAIN_AFTER_DETACH = frozenset({"detach", "clone", "cpu", "contiguous", "float", "half", "double", "bfloat16", "to"})
"""Methods after which a tensor still has no autograd history (``x.detach().cpu()``)."""


def _may_be(value: ast.expr, grad: bool) -> bool:
    """Whether the added ``value`` can be the leaked tensor (``grad``: it has autograd history)."""
    if isinstance(value, (ast.Constant, ast.JoinedStr, ast.Dict, ast.Set, ast.List, ast.Tuple, ast.ListComp,
                          ast.DictComp, ast.SetComp)):
        return False  # a number or string; a display adds itself, the tensor is one level further in
    if isinstance(value, ast.Call):
        func = value.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in NOT_TENSORS:
            return False
        if grad:  # x.detach(), x.detach().cpu(): no history, so not this tensor
            node: ast.expr = value
            while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in PLAIN_AFTER_DETACH:
                if node.func.attr == "detach":
                    return False
                node = node.func.value
    return True


_STATEMENTS: dict[int, tuple[ast.Module, list[ast.AST], dict[int, list[ast.AST]], dict[Any, Any]]] = {}


def statements(tree: ast.Module) -> tuple[list[ast.AST], dict[int, list[ast.AST]], dict[Any, Any]]:
    """The calls, assignments and augmented assignments of ``tree`` (the statements the leak
    readers look for) in :func:`ast.walk`'s order, all and by line, from one walk of the
    tree, and a dict where the readers keep what they derived from it per name.

    Each reader walked the whole tree at each call, and they are called at every leak check
    for each leaking site (``may_keep`` once more per line found): with a 33,000-line
    script that leaked a loss, 16 checks cost 21.6 s under cProfile. Filtering keeps
    the walk's order, so every reader finds what it found before."""
    entry = _STATEMENTS.get(id(tree))
    if entry is None or entry[0] is not tree:
        if len(_STATEMENTS) >= 16:
            _STATEMENTS.clear()
        nodes: list[ast.AST] = [n for n in ast.walk(tree) if isinstance(n, (ast.Call, ast.AugAssign, ast.Assign))]
        by_line: dict[int, list[ast.AST]] = {}
        for node in nodes:
            by_line.setdefault(getattr(node, "lineno", 0), []).append(node)
        entry = _STATEMENTS[id(tree)] = (tree, nodes, by_line, {})  # the tree kept: its id stays its own
    return entry[1], entry[2], entry[3]


def _added(tree: ast.Module, line: int, name: str) -> list[ast.expr] | None:
    """The values the statement at ``line`` adds to ``name`` (``self.outs``): the argument
    of ``append``/``add``/``insert``, the items of ``extend([...])`` or ``+= [...]``, the value
    of ``name[k] = v``; None when they cannot be told (``extend(batch_outputs)``)."""
    for node in statements(tree)[1].get(line, ()):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and dotted(node.func.value) == name:
            attr, args = node.func.attr, node.args
            if attr in ("append", "add", "appendleft") and len(args) == 1:
                return [args[0]]
            if attr == "insert" and len(args) == 2:
                return [args[1]]
            if attr == "setdefault" and len(args) == 2:
                return [args[1]]
            if attr == "extend" and len(args) == 1:
                return _items(args[0])
            return None
        if isinstance(node, ast.AugAssign) and dotted(node.target) == name:
            return _items(node.value)
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript)
                and dotted(node.targets[0].value) == name):
            return [node.value]
    return None


def _items(value: ast.expr) -> list[ast.expr] | None:
    return list(value.elts) if isinstance(value, (ast.List, ast.Tuple)) else None


def dotted(node: ast.expr) -> str:
    """``self.outs`` for that attribute chain, ``history['loss']`` for a subscript by a str
    or int constant (written as ``ast.unparse`` and ``repr`` write it), '' for anything
    else (also ops_leaks' reader)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        key = node.slice.value
        inner = dotted(node.value)
        return f"{inner}[{key!r}]" if inner and type(key) in (str, int) else ""
    return ""


def keeping_line(codes: list[CodeType], name: str, adding_lines: Callable[[str, str], list[int]],
                 grad: bool) -> tuple[str, int] | None:
    """(file, line) of the one line of ``codes`` (the owner class's methods) that adds to
    ``name`` a value that can be the leaked tensor; None when none or several are left."""
    found: set[tuple[str, int]] = set()
    for file in dict.fromkeys(code.co_filename for code in codes):
        spans = [_code_lines(code) for code in codes if code.co_filename == file]
        lines = [n for n in adding_lines(file, name) if any(first <= n <= last for first, last in spans)]
        tree = parsed(file) if lines else None
        found.update((file, n) for n in lines if tree is None or may_keep(tree, n, name, grad))
    return found.pop() if len(found) == 1 else None


def may_keep(tree: ast.Module, line: int, name: str, grad: bool) -> bool:
    """Whether the statement at ``line`` of ``tree`` can add the leaked tensor to ``name``
    (``grad``: the tensor has autograd history): True when what it adds cannot be told."""
    values = _added(tree, line, name)
    return values is None or any(_may_be(v, grad) for v in values)


class Referrers:
    """The referrers of several objects from one walk of the heap.

    ``gc.get_referrers`` walks every object the collector tracks (15-20 ms on a training
    process's heap), and a check searched the owner of each leaking line on its own, twice
    (:func:`find_owner`, then :func:`replayed`): the four lines a kept autograd graph's
    saved tensors came from (``total += loss``: no Python container holds them) took 16
    walks, a 240 ms pause in one step. One walk for all of them here; :meth:`of` gives each
    object's referrers in the order ``gc.get_referrers`` gives them."""

    def __init__(self, objects: list[Any]) -> None:
        self._objects = objects
        self._found: dict[int, list[Any]] | None = None

    def of(self, obj: Any) -> list[Any]:
        if not any(o is obj for o in self._objects):
            return gc.get_referrers(obj)  # not announced: a walk of its own
        if self._found is None:
            self._found = self._walk()
        return self._found.get(id(obj), [])

    def _walk(self) -> dict[int, list[Any]]:
        objects = self._objects
        ids = {id(o) for o in objects}
        found: dict[int, list[Any]] = {}
        for ref in gc.get_referrers(*objects):
            if ref is objects:
                continue
            for held in {id(o) for o in gc.get_referents(ref)} & ids:
                found.setdefault(held, []).append(ref)
        return found


def find_owner(survivor: Any, is_user: Callable[[CodeType], bool],
               adding_lines: Callable[[str, str], list[int]], heap: Referrers | None = None) -> dict[str, Any] | None:
    """``{"name": "self.outs", "file", "line", "size", "bounded", "owner", "object", "attr"}`` for the user
    object whose attribute holds ``survivor`` and the line of its class that adds
    ``survivor`` to ``self.<attr>`` (:func:`keeping_line`); None when there is none, or
    when which line it is cannot be told (never raises). ``heap``: its referrers, read
    with other survivors' in one walk."""
    try:
        grad = getattr(survivor, "grad_fn", None) is not None
        found = heap.of(survivor) if heap is not None else gc.get_referrers(survivor)
        referrers = [r for r in found if _is_container(r)][:MAX_REFERRERS]
        for container in referrers:
            for obj, attr in _owners(container):
                codes = _user_methods(obj, is_user)
                where = keeping_line(codes, f"self.{attr}", adding_lines, grad) if codes else None
                if where is None:
                    continue
                try:
                    size = len(container)
                except Exception:
                    size = 0
                return {"name": f"self.{attr}", "file": where[0], "line": where[1],
                        "size": size, "bounded": getattr(container, "maxlen", None) is not None,
                        "owner": type(obj).__name__, "object": obj, "attr": attr}
    except Exception:
        return None
    return None


def replayed(survivor: Any, heap: Referrers | None = None) -> bool:
    """Whether an ``itertools.cycle`` keeps ``survivor``: in the list of the first pass it
    saves and replays (the batch itself, or a batch's list, tuple or dict inside it).

    ``labeled_iter = itertools.cycle(labeled_loader)`` with ``next(labeled_iter)`` a step
    (semi-supervised loops), or ``for x in itertools.cycle(loader)``: the batches of the
    first pass stay alive for good, so those of early sampled steps read as a pile-up,
    though nothing grows after that pass. With small batches the process's memory cannot
    tell (a FixMatch loop's labeled batches added 30 KiB in all). A cycle is no variable
    the frame search reads as a container, and the anonymous one is no variable at all, so
    it is found from the tensor's side: at most three walks of the heap (one per level,
    every container of a level at once; the first shared through ``heap``), run once per
    leaking site where no owner was found (never raises)."""
    try:
        found = heap.of(survivor) if heap is not None else gc.get_referrers(survivor)
        level = [r for r in found if type(r) in (list, tuple, dict)][:MAX_REFERRERS]
        for _ in range(2):
            if not level:
                return False
            ids = {id(c) for c in level}
            above = [r for r in gc.get_referrers(*level) if r is not level]
            for ref in above:
                if type(ref) is itertools.cycle and any(id(k) in ids for k in gc.get_referents(ref)):
                    return True
            level = [r for r in above if type(r) in (list, tuple, dict)][:MAX_REFERRERS]
    except Exception:
        return False
    return False
