"""The edits themselves: one change at one line of the user's source, through libcst.

libcst keeps every byte it is not asked to change (comments, blank lines, the user's
spacing and line breaks), so a patch is the fix and nothing else, which a regex over text
or ``ast.unparse`` cannot promise. Each function takes the source text and returns the
new text, or raises :class:`NotFound` with the reason when the construct is not at the
line the finding names: the caller reports "not patched" instead of guessing.

One module per kind of edit (:mod:`.calls`, :mod:`.kept`, :mod:`.imports`, :mod:`.dtypes`,
:mod:`.guard`, :mod:`.unwrap`, over the shared :mod:`.nodes`); this package names them all, so the planner
and the tests import ``cst.set_keywords`` whichever module holds it.
"""

from __future__ import annotations

from .calls import find_call, set_first_argument, set_keywords
from .devices import cuda_calls_to, device_string_at
from .dtypes import float32_at
from .guard import add_main_guard, has_main_guard
from .imports import ensure_import, insert_after_import, set_environ_first
from .kept import (
    accumulator_method,
    added_value_detached,
    added_value_number,
    augassign_detached,
    augassign_item,
    bounded_container,
    keyed_value_bounded,
    sets_a_key,
)
from .loops import define_after_imports, first_in_loop
from .nodes import NotFound, call_name
from .options import set_option_default
from .unwrap import unwrap_with

__all__ = [
    "NotFound", "accumulator_method", "add_main_guard", "added_value_detached", "added_value_number", "augassign_detached", "augassign_item",
    "bounded_container", "call_name", "cuda_calls_to", "define_after_imports", "device_string_at", "ensure_import", "find_call", "first_in_loop", "keyed_value_bounded", "sets_a_key", "float32_at", "has_main_guard",
    "insert_after_import", "set_environ_first", "set_first_argument", "set_keywords", "set_option_default",
    "unwrap_with",
]
