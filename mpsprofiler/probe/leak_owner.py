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

``gc.get_referrers`` walks every tracked object (tens of ms in a process with a
framework imported); it runs only for a tensor already found alive on two checks, and
only when the frame search named no adding line, so a clean run never pays it.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from types import CodeType
from typing import Any

MAX_REFERRERS = 64
"""Containers (and owners) examined per step: the first ones are the candidates."""


def _is_container(value: Any) -> bool:
    return isinstance(value, (list, dict, set)) or type(value).__name__ == "deque"


def _owners(container: Any) -> list[tuple[Any, str]]:
    """(object, attribute) pairs whose attribute is ``container``."""
    found: list[tuple[Any, str]] = []
    for ref in gc.get_referrers(container)[:MAX_REFERRERS]:
        if isinstance(ref, dict):
            # a materialised instance __dict__: its owner refers to it
            objects = [o for o in gc.get_referrers(ref)[:MAX_REFERRERS] if getattr(o, "__dict__", None) is ref]
            attrs = [k for k, v in ref.items() if v is container and isinstance(k, str)]
            found.extend((o, a) for o in objects for a in attrs[:1])
        else:
            attrs_of = getattr(ref, "__dict__", None)
            if isinstance(attrs_of, dict) and not isinstance(ref, type):
                found.extend((ref, k) for k, v in list(attrs_of.items()) if v is container and isinstance(k, str))
    return found


def _user_methods(obj: Any, is_user: Callable[[CodeType], bool]) -> list[CodeType]:
    """The code of the user's methods on ``obj``'s class and its bases (library classes
    are skipped: a framework's own lists are not the script's leak)."""
    codes: list[CodeType] = []
    for cls in type(obj).__mro__:
        for value in vars(cls).values():
            code = getattr(value, "__code__", None)
            if isinstance(code, CodeType) and is_user(code):
                codes.append(code)
    return codes


def find_owner(survivor: Any, is_user: Callable[[CodeType], bool],
               adding_lines: Callable[[str, str], list[int]]) -> dict[str, Any] | None:
    """``{"name": "self.outs", "file", "line", "size", "bounded", "owner", "object", "attr"}`` for the user
    object whose attribute holds ``survivor`` and a line of its class's file that adds to
    ``self.<attr>``; None when there is none (never raises)."""
    try:
        referrers = [r for r in gc.get_referrers(survivor) if _is_container(r)][:MAX_REFERRERS]
        for container in referrers:
            for obj, attr in _owners(container):
                for code in _user_methods(obj, is_user):
                    lines = adding_lines(code.co_filename, f"self.{attr}")
                    if lines:
                        try:
                            size = len(container)
                        except Exception:
                            size = 0
                        return {"name": f"self.{attr}", "file": code.co_filename, "line": lines[0],
                                "size": size, "bounded": getattr(container, "maxlen", None) is not None,
                                "owner": type(obj).__name__, "object": obj, "attr": attr}
    except Exception:
        return None
    return None
