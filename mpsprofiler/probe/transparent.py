"""Wrappers around torch functions that warnings see through.

Torch warns with ``warnings.warn(..., stacklevel=2)`` in many places (the DataLoader's
``pin_memory`` and worker-count checks, ``torch.compile`` inside an export region, an
IterableDataset's wrong length): the warning names the file and line of the *caller* of
the torch function. When the probe wraps that function, the caller is the wrapper, and
plain ``python`` and ``mpsprof run`` would print different warnings.

CPython does not count frames of its own import machinery when it walks ``stacklevel``
frames up: a frame whose file name contains both ``importlib`` and ``_bootstrap`` is
skipped (``is_internal_filename`` in CPython's Python/_warnings.c, ``_is_internal_frame``
/ ``_is_internal_filename`` in Lib/warnings.py, the same rule in 3.8 to 3.14). A wrapper
whose code object carries such a file name is therefore skipped the same way, and the
warning keeps exactly the location (file, line, module, registry) plain Python gives it.
The name still starts with this package's directory, so the boot's traceback filter and
the op sampler's frame finder keep treating the frame as mpsprof's own.

Limit: a warning issued by C++ code (``TORCH_WARN``) of a C function the wrapper calls
directly has stacklevel 1 and names the wrapper's frame; no Python-level wrapper can
avoid that (it concerns the Tensor methods wrapped during sampled steps only).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

HIDDEN_FILENAME = os.path.join(os.path.dirname(os.path.abspath(__file__)), "<wrapper, skipped like importlib._bootstrap>")
"""Contains 'importlib' and '_bootstrap': the warnings machinery skips the frame."""


def hide_from_warnings(fn: F) -> F:
    """Give ``fn`` (a plain Python function) a code object the warnings module skips.

    Returns ``fn`` itself, changed in place; a callable without ``__code__`` is returned
    unchanged (nothing to hide). Nested functions keep their own code objects: wrappers
    passed here call the original directly (closures are fine; a lambda inside keeps
    its own file name, so it must not call torch).
    """
    code = getattr(fn, "__code__", None)
    if code is None:
        return fn
    try:
        fn.__code__ = code.replace(co_filename=HIDDEN_FILENAME)
    except (AttributeError, TypeError, ValueError):
        pass
    return fn
