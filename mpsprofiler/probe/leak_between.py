"""Containers that grow between the steps with tensors that keep their autograd graphs.

The sampled leak tracking (:mod:`.ops_leaks`) follows the tensors ops make inside sampled
steps. An evaluation pass the script runs between two training steps (``if step % 100 ==
0: evaluate()``) is no step, and a sampled step that reaches one is cut at its time cap:
``preds.append(model(x))`` there, outside ``torch.no_grad()``, keeps every batch's graph
in a list that lives for the run, and no line was named.

This needs no op of the pass: at the tracker's checks (step boundaries, a few dozen in a
run) the user frames' variables, one attribute away and their modules' globals, are
looked over for lists and deques whose last item is a tensor with autograd history (a
tensor, or a tuple or list holding one). One that grew at two checks in a row, to
``MIN_ITEMS`` or more, is told with the line that adds to it (``_adding_line``: the
script's own ``name.append(...)``; none is told where no line alone qualifies). Only
builtin containers are read (``len`` and the last item: no user ``__len__`` or property
runs), nothing is kept but names, lengths and step numbers, and a list emptied or made
anew (gradient accumulation's ``losses = []`` every N steps) starts over.
"""

from __future__ import annotations

import collections
import sys
from collections.abc import Callable, Iterator
from typing import Any, cast

import torch

from .leak_reach import graph_held, own_attributes

MIN_ITEMS = 8
"""Items a container holds before it is told: a list of a few losses kept for a backward
every N steps (gradient accumulation) stays under it."""
GROWTHS = 2
"""Checks in a row at which the container was longer than at the one before."""
MAX_NAMES = 200
"""Names (attributes, globals) looked at per object or module: a bound on the walk."""
MAX_FOLLOWED = 64
"""Containers followed at once (names and lengths only)."""


def _graph_tail(value: Any) -> torch.Tensor | None:
    """The tensor with autograd history at the end of a builtin list or deque, if any."""
    if type(value) not in (list, collections.deque) or not value:
        return None
    last = value[-1]
    items = last if type(last) in (tuple, list) else (last,)
    for item in items[:4]:  # by type, not isinstance: no __getattribute__ of theirs runs (leak_reach)
        if issubclass(type(item), torch.Tensor) and item.grad_fn is not None:
            return cast(torch.Tensor, item)
    return None


def _named(frame: Any, scanned: set[int]) -> Iterator[tuple[str, Any]]:
    """(name as the script writes it, value): a frame's locals, one attribute of its
    objects (``self.preds``), its module's globals (once per module)."""
    local = list(frame.f_locals.items())
    yield from local
    for name, value in local:
        # the instance's own __dict__, read without running the script's __getattr__ or
        # __getattribute__ (a proxy's, a lazy object's): leak_reach's reader
        for attr, inner in own_attributes(value)[:MAX_NAMES]:
            if type(attr) is str:
                yield f"{name}.{attr}", inner
    glob = frame.f_globals
    if id(glob) not in scanned and glob is not frame.f_locals:
        scanned.add(id(glob))
        for name, value in list(glob.items())[:MAX_NAMES * 5]:
            if not name.startswith("__"):
                yield name, value


class BetweenScan:
    """Followed containers by (file, name); ``found`` those that grew at ``GROWTHS`` checks."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], dict[str, Any]] = {}

    def check(self, step: int, is_user: Callable[[Any], bool], adding_line: Callable[..., int | None]) -> None:
        """One look at the user frames' containers at a step boundary (``adding_line``:
        :func:`.ops_leaks._adding_line`, handed in: that module imports this one)."""
        frame: Any = sys._getframe(1)
        stack: list[Any] = []
        scanned: set[int] = set()
        now: set[tuple[str, str]] = set()
        while frame is not None:
            if is_user(frame.f_code):
                stack.append(frame.f_code)
                file = frame.f_code.co_filename
                for name, value in _named(frame, scanned):
                    tail = _graph_tail(value)
                    key = (file, name)
                    if tail is None or key in now:
                        continue
                    now.add(key)
                    self._note(key, len(value), step, tail, list(stack), adding_line)
            frame = frame.f_back
        for key in [k for k in self._seen if k not in now]:
            del self._seen[key]  # gone, emptied or its last item detached: starts over if seen again

    def _note(self, key: tuple[str, str], size: int, step: int, tail: torch.Tensor, stack: list[Any],
              adding_line: Callable[..., int | None]) -> None:
        entry = self._seen.get(key)
        if entry is None:
            if len(self._seen) < MAX_FOLLOWED:
                self._seen[key] = {"size0": size, "step0": step, "size": size, "step": step, "grew": 0}
            return
        if size > entry["size"]:
            entry["grew"] += 1
        elif size < entry["size"]:
            entry.update(size0=size, step0=step, grew=0)  # emptied, or made anew
        entry.update(size=size, step=step)
        if entry["grew"] >= GROWTHS and size >= MIN_ITEMS and "line" not in entry:
            entry["line"] = adding_line(key[0], key[1], stack, True) or 0
        if entry.get("line"):
            nodes, saved, _ = graph_held([tail.grad_fn], 2_000)
            entry.update(nodes=nodes, saved=saved)

    def found(self) -> list[dict[str, Any]]:
        """The containers told: name, file, line of the append, lengths and steps, and what
        the last item's graph held (``nodes``, ``saved`` bytes)."""
        return [{"name": name, "file": file, **{k: v for k, v in e.items() if k != "grew"}}
                for (file, name), e in self._seen.items()
                if e["grew"] >= GROWTHS and e["size"] >= MIN_ITEMS and e.get("line")]
