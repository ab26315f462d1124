"""Paths in a human-readable report, as the reader needs them: relative to the working
directory, or with ``~`` for the home directory.

A Markdown or HTML report is made to be pasted into an issue or attached to a mail; an
absolute ``/Users/jane/...`` in it tells the world a user name and a directory layout
(issue 29). The renderers pass their finished text through :func:`display_paths`, which
rewrites every occurrence of the working directory and of the home directory at a path
boundary (script, run directory, Python, traceback frames, a finding's ``file:line``),
outside the fixes' code blocks (:data:`_CODE`).
``mpsprof report --absolute-paths`` keeps them as recorded (:data:`ABSOLUTE_PATHS`). The
JSON summary and the trace are data, not prose: they keep the recorded paths.
"""

from __future__ import annotations

import os
import re
from contextvars import ContextVar
from pathlib import Path

ABSOLUTE_PATHS: ContextVar[bool] = ContextVar("mpsprof_absolute_paths", default=False)
"""Set by ``mpsprof report --absolute-paths``: reports keep paths as recorded."""

_BEFORE = r"(?<![\w.~/-])"
"""A path starts here: not inside a longer name or path (``/x/home/u`` is not ``~``)."""
_AFTER = r"(/|(?![\w.-]))"
"""And the prefix ends at a separator or the end of the name (``/home/user2`` is not ``~2``)."""


_CODE = re.compile(r"(^```python$.*?^```[ \t]*$|<pre><code class=\"language-python\">.*?</pre>)",
                   re.DOTALL | re.MULTILINE)
"""A fix's Python code block (Markdown's fence, as HTML renders it): the script's own lines,
string literals included (``output_dir="/home/jane/runs"``), to be pasted as they are.
Shortened, the pasted fix wrote elsewhere (``output_dir="runs"``); a path there is the
user's own text, as the script they share has it."""


def _prefix(path: str | None) -> str | None:
    """A directory worth rewriting: absolute, and not the root itself."""
    if not path:
        return None
    text = os.path.normpath(path)
    return text if os.path.isabs(text) and text != os.sep else None


def display_paths(text: str, cwd: str | None = None, home: str | None = None) -> str:
    """``text`` with the working directory's prefix dropped (``./`` when the path is the
    directory itself) and the home directory's written ``~``; unchanged under
    :data:`ABSOLUTE_PATHS`. The working directory is tried first: it is the longer one
    when it lies in the home directory."""
    if ABSOLUTE_PATHS.get():
        return text
    parts = _CODE.split(text)
    if len(parts) > 1:  # prose and code blocks alternate: the blocks stay as they are
        return "".join(p if i % 2 else display_paths(p, cwd, home) for i, p in enumerate(parts))
    work = _prefix(cwd if cwd is not None else _cwd())
    home_dir = _prefix(home if home is not None else os.path.expanduser("~"))
    if work:
        text = re.sub(_BEFORE + re.escape(work) + _AFTER, lambda m: "" if m.group(1) == "/" else ".", text)
    if home_dir:
        text = re.sub(_BEFORE + re.escape(home_dir) + _AFTER, lambda m: "~" + m.group(1), text)
    return text


def _cwd() -> str | None:
    try:
        return str(Path.cwd())
    except OSError:  # the working directory was removed: nothing to be relative to
        return None
