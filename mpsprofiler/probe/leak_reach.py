"""Tensors one step away from a training loop's variables, and what an autograd graph keeps.

The graph-carry check (:meth:`ops_leaks.LeakTracker._find_carries`) read the user frames'
locals only: ``total += loss`` was found, but the same sum kept in an attribute
(``self.total += loss`` in a trainer's method) or under a key of a dict (``stats["loss"] =
stats["loss"] + loss``, ``self.stats["loss"] += loss``) was no local, and every step's
graph stayed alive without a word. :func:`reached` yields the tensors with autograd
history that a local reaches through one attribute or one dict or list entry, and through
an attribute's dict entries, so ``self.stats["loss"]`` is found from ``self``. It is
bounded (a capped number of entries per object and of tensors in all) because it runs at
each leak check, and it reads ``__dict__`` with ``object.__getattribute__`` so that no
user ``__getattr__`` (a proxy, a lazy object) runs.

Sizes: a kept tensor's own storage is all the leak check measured, so a loss kept with its
graph read "0.0 KiB" (four bytes), whatever the graph held. :func:`graph_held` walks the
graph and sums the tensors its nodes saved for backward and still hold (``backward()``
frees them), leaving out the model's parameters
(the model keeps those anyway), and counts the nodes, which stay until the graph's root
dies.
"""

from __future__ import annotations

import types
from collections import deque
from collections.abc import Iterator
from itertools import islice
from typing import Any

import torch

MAX_ENTRIES = 256
"""Attributes of one object, or entries of one dict, read per check (a trainer has dozens)."""
MAX_LIST = 16
"""Entries of one list or tuple read (``running[0] += loss``; not a dataset's list)."""
MAX_REACHED = 48
"""Tensors with autograd history yielded per frame walk: each costs a graph walk."""
NO_SEQ = 1 << 63
"""Sequence numbers at or above this belong to no step (AccumulateGrad: a parameter's own)."""

_SKIP = (type, types.ModuleType, types.FunctionType, types.MethodType, types.BuiltinFunctionType,
         torch.Tensor, str, bytes, int, float, bool)  # fmt: skip
_SKIP_OR_CONTAINER = (*_SKIP, dict, list, tuple)


def _graph(value: Any) -> bool:
    return issubclass(type(value), torch.Tensor) and value.grad_fn is not None


def _entries(name: str, value: Any) -> Iterator[tuple[str, Any]]:
    """(``name['k']`` / ``name[0]``, entry) for a dict's str or int keys and a list's first
    entries, written as ``ast.unparse`` writes a subscript (leak_owner.dotted)."""
    try:
        if issubclass(type(value), dict):
            for key, inner in list(islice(value.items(), MAX_ENTRIES)):
                if type(key) in (str, int):
                    yield f"{name}[{key!r}]", inner
        elif issubclass(type(value), (list, tuple)):
            for i, inner in enumerate(value[:MAX_LIST]):
                yield f"{name}[{i}]", inner
    except Exception:  # changed while read (another thread): nothing this time
        return


def own_dict(value: Any) -> dict[Any, Any] | None:
    """An object's ``__dict__``, read without running its class's ``__getattr__`` or
    ``__getattribute__``; None where it has none (or not a dict: a class's mappingproxy)."""
    try:
        attrs = object.__getattribute__(value, "__dict__")
    except Exception:
        return None
    return attrs if type(attrs) is dict else None


def own_attributes(value: Any) -> list[tuple[str, Any]]:
    """An instance's own attributes (``__dict__``, read without running ``__getattr__``)."""
    if issubclass(type(value), _SKIP_OR_CONTAINER):
        return []
    attrs = own_dict(value)
    try:
        return list(islice(attrs.items(), MAX_ENTRIES)) if attrs is not None else []
    except Exception:  # changed while read (another thread)
        return []


def reached(local: str, value: Any, seen: set[int]) -> Iterator[tuple[str, torch.Tensor, Any]]:
    """(expression, tensor, owner) for each tensor with autograd history that the frame's
    variable ``local`` holds through one attribute (``self.total``), one dict or list entry
    (``stats['loss']``) or an attribute's dict entry (``self.stats['loss']``); ``owner`` is
    the object whose attribute leads there (its class's methods hold the line that writes
    it), None for an entry of a local. ``seen``: ids already yielded or looked at (shared
    over a frame walk, so an object held by several frames is read once)."""
    if id(value) in seen or issubclass(type(value), _SKIP):
        return
    seen.add(id(value))
    for expr, inner in _entries(local, value):
        if _graph(inner) and id(inner) not in seen:
            seen.add(id(inner))
            yield expr, inner, None
    for attr, inner in own_attributes(value):
        if type(attr) is not str:
            continue
        expr = f"{local}.{attr}"
        if _graph(inner) and id(inner) not in seen:
            seen.add(id(inner))
            yield expr, inner, value
        elif issubclass(type(inner), (dict, list, tuple)) and id(inner) not in seen:
            seen.add(id(inner))
            for key_expr, entry in _entries(expr, inner):
                if _graph(entry) and id(entry) not in seen:
                    seen.add(id(entry))
                    yield key_expr, entry, value


_SAVED: dict[type, tuple[str, ...]] = {}


def _saved_names(node: Any) -> tuple[str, ...]:
    """The node's saved tensors, as ``_raw_saved_<name>`` (a ``SavedTensor``, or a list of
    them): its ``.data`` is the tensor, None once ``backward()`` freed it. Reading
    ``_saved_<name>`` instead unpacks, and a freed one raises an error whose C++ backtrace
    costs 30 us a node (a carried graph of thousands of nodes: a pause of a tenth of a
    second at each check)."""
    kind = type(node)
    if kind not in _SAVED:
        _SAVED[kind] = tuple(a for a in dir(node) if a.startswith("_raw_saved_"))
    return _SAVED[kind]


def _saved_tensors(node: Any) -> Iterator[torch.Tensor]:
    for name in _saved_names(node):
        try:
            value = getattr(node, name)
            for saved in value if isinstance(value, (tuple, list)) else (value,):
                data = saved.data
                if isinstance(data, torch.Tensor):
                    yield data
        except Exception:  # a saved-tensor hook's own packing: not ours to unpack
            continue


def storage_of(t: torch.Tensor) -> tuple[int, int] | None:
    """(storage address, bytes) of ``t``, each storage counted once by its callers (views
    share one); None where it has none to read (a sparse or meta tensor, a subclass)."""
    try:
        storage = t.untyped_storage()
        return storage.data_ptr(), storage.nbytes()
    except Exception:
        return None


class GraphWalk:
    """The autograd nodes reachable from ``roots`` (``grad_fn`` nodes), breadth first (a
    chained accumulation is one hop from its root), each with its sequence number, at most
    ``cap`` of them: both graph walks of the leak check (a graph spanning steps,
    ``ops_leaks._spans``; what a graph holds, :func:`graph_held`). ``capped`` after the
    iteration: the cap stopped it with nodes left."""

    def __init__(self, roots: list[Any], cap: int) -> None:
        self._todo: deque[Any] = deque(roots)
        self._cap = cap

    def __iter__(self) -> Iterator[tuple[Any, int]]:
        todo, seen = self._todo, set[int]()
        while todo and len(seen) < self._cap:
            node = todo.popleft()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            try:
                seq = node._sequence_nr()
                nxt = node.next_functions
            except Exception:
                continue
            yield node, seq
            todo.extend(n for n, _ in nxt if n is not None)

    @property
    def capped(self) -> bool:
        return bool(self._todo)


def graph_held(roots: list[Any], cap: int) -> tuple[int, int, bool]:
    """(autograd nodes, bytes of tensors they saved and still hold, whether ``cap`` nodes
    stopped the walk) of the graphs from ``roots`` (``grad_fn`` nodes). A parameter (or a
    view of one: ``addmm`` saves ``weight.t()``) is not counted: the model holds it anyway;
    nor are AccumulateGrad nodes, a parameter's own. Storages are counted once."""
    saved: dict[int, int] = {}
    params: set[int] = set()
    nodes = 0
    walk = GraphWalk(roots, cap)
    for node, seq in walk:
        variable = getattr(node, "variable", None) if seq >= NO_SEQ else None
        if isinstance(variable, torch.Tensor) and (found := storage_of(variable)) is not None:
            params.add(found[0])
        if seq < NO_SEQ:
            nodes += 1
            for t in _saved_tensors(node):
                if not isinstance(t, torch.nn.Parameter) and not isinstance(t._base, torch.nn.Parameter) \
                        and (found := storage_of(t)) is not None:
                    saved[found[0]] = found[1]
    return nodes, sum(b for ptr, b in saved.items() if ptr not in params), walk.capped
