"""The script's own line, rewritten: fix snippets that are the user's code with one change.

A fix that shows a template (``DataLoader(dataset, batch_size=64, shuffle=True, ...)``)
makes the user translate it back into their code, and invents arguments they never
wrote. The probe records where an object was built (file:line); here the parent reads
that file, finds the call with the standard library's :mod:`ast` (its extent and its
arguments as written), and returns the statement with only the named keyword arguments
set. Reading fails quietly (file gone, not Python, edited since): then the caller keeps
its generic text.
"""

from __future__ import annotations

import ast
import io
import os
import tokenize
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MAX_SOURCE_BYTES = 2_000_000
LINE_WIDTH = 88


@dataclass
class Rewrite:
    path: str
    line: int
    before: str
    after: str
    has_main_guard: bool

    def place(self, cwd: object) -> str:
        """``file:line`` of the rewritten statement as the texts name it (:func:`short_path`)."""
        return f"{short_path(self.path, cwd)}:{self.line}"


_TREES: dict[str, tuple[str, ast.Module]] = {}
MAX_TREES = 8


def read_tree(path: str) -> tuple[str, ast.Module] | None:
    """The file's text and its syntax tree; the tree parsed once while the text is the
    same (the analyzers ask for the script's tree once per site and per fix: a report on a
    33,000-line script with a few findings parsed it again each time, ~0.3 s a parse).
    The tree is shared: callers read it and never change it."""
    try:
        if os.path.getsize(path) > MAX_SOURCE_BYTES:
            return None
        with open(path, encoding="utf-8") as fh:
            source = fh.read()
        known = _TREES.get(path)
        if known is not None and known[0] == source:
            return known
        if len(_TREES) >= MAX_TREES:
            _TREES.clear()
        read = _TREES[path] = (source, ast.parse(source))
        return read
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return None


def call_name(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def find_call(tree: ast.Module, line: int, names: tuple[str, ...],
              keep: Callable[[ast.Call], bool] | None = None) -> tuple[ast.stmt, ast.Call] | None:
    """The innermost call of one of ``names`` spanning ``line`` (of those ``keep`` takes,
    where given), and its innermost statement."""
    found: list[tuple[int, int, int, ast.stmt, ast.Call]] = []
    for stmt in ast.walk(tree):
        if not isinstance(stmt, ast.stmt) or not stmt.lineno <= line <= _end(stmt):
            continue
        for node in ast.walk(stmt):
            if (isinstance(node, ast.Call) and call_name(node) in names and node.lineno <= line <= _end(node)
                    and (keep is None or keep(node))):
                found.append((_end(node) - node.lineno, _end(stmt) - stmt.lineno, len(found), stmt, node))
    if not found:
        return None
    best = min(found, key=lambda t: t[:3])
    return best[3], best[4]


def _end(node: ast.stmt | ast.expr | ast.keyword) -> int:
    return node.end_lineno or node.lineno


def rewrite_call(path: str, line: int, names: tuple[str, ...], changes: dict[str, str],
                 positional: dict[int, str] | None = None,
                 keep: Callable[[ast.Call], bool] | None = None) -> Rewrite | None:
    """The statement at ``path:line`` whose call to ``names`` (one ``keep`` takes, where
    given) gets the keyword ``changes`` (name -> source text of the value) and the
    ``positional`` arguments (index -> text), the other arguments kept as written."""
    read = read_tree(path)
    if read is None:
        return None
    source, tree = read
    found = find_call(tree, line, names, keep)
    if found is None:
        return None
    stmt, call = found
    seg = ast.get_source_segment
    func = seg(source, call.func)
    if func is None:
        return None
    args: list[str] = []
    for i, a in enumerate(call.args):
        text = seg(source, a)
        if text is None:
            return None
        if positional and i in positional:
            args.append(positional[i])
            continue
        args.append(("*" + text) if isinstance(a, ast.Starred) and not text.startswith("*") else text)
    done: set[str] = set()
    for kw in call.keywords:
        value = seg(source, kw.value)
        if value is None:
            return None
        if kw.arg is None:
            args.append("**" + value)
        elif kw.arg in changes:
            args.append(f"{kw.arg}={changes[kw.arg]}")
            done.add(kw.arg)
        else:
            args.append(f"{kw.arg}={value}")
    args.extend(f"{k}={v}" for k, v in changes.items() if k not in done)
    if positional and not call.args and not call.keywords:
        args.extend(v for _, v in sorted(positional.items()))
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for text in lines:
        offsets.append(offsets[-1] + len(text.encode("utf-8")))
    data = source.encode("utf-8")

    def at(lineno: int, col: int) -> int:
        return offsets[lineno - 1] + col

    s0 = at(stmt.lineno, stmt.col_offset)
    s1 = at(stmt.end_lineno or stmt.lineno, stmt.end_col_offset or 0)
    c0 = at(call.lineno, call.col_offset)
    c1 = at(call.end_lineno or call.lineno, call.end_col_offset or 0)
    if not s0 <= c0 < c1 <= s1:
        return None
    indent = stmt.col_offset
    if (call.end_lineno or call.lineno) > call.lineno and _has_comment(data[c0:c1].decode("utf-8")):
        # a call written over lines with comments in it: its own text with the changes made
        # in place, the comments where they were (rebuilt from its arguments, they were lost)
        spliced = _splice(call, changes, positional or {}, at, data, lines)
        if spliced is not None:
            text = _apply(data[s0:s1], [(a - s0, b - s0, t) for a, b, t in spliced])
            return Rewrite(path, stmt.lineno, _dedent(data[s0:s1].decode("utf-8"), indent),
                           _dedent(text, indent), has_main_guard(tree))
    prefix = _dedent(data[s0:c0].decode("utf-8"), indent)
    suffix = _dedent(data[c1:s1].decode("utf-8"), indent)
    flat = f"{func}({', '.join(args)})"
    if len(prefix) + len(flat) + len(suffix) <= LINE_WIDTH and "\n" not in prefix:
        new_call = flat
    else:
        new_call = f"{func}(\n" + "".join(f"    {a},\n" for a in args) + ")"
    before = _dedent(data[s0:s1].decode("utf-8"), indent)
    return Rewrite(path, stmt.lineno, before, prefix + new_call + suffix, has_main_guard(tree))


def _has_comment(text: str) -> bool:
    """Whether the call's text holds a ``#`` comment (a token, not a ``#`` in a string)."""
    try:
        return any(t.type == tokenize.COMMENT for t in tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return "#" in text  # unreadable: kept as written rather than risk losing one


def _splice(call: ast.Call, changes: dict[str, str], positional: dict[int, str],
            at: Callable[[int, int], int], data: bytes, lines: list[str]) -> list[tuple[int, int, str]] | None:
    """The edits (byte start, byte end, new text) that make ``call`` as written carry the
    changes: a value written is replaced where it is, new keywords go after the last
    argument in the call's layout (on lines of their own at its indent where the arguments
    end their line, after its comment; else on its line), its trailing comma kept. None for
    a call without arguments (nothing to follow)."""
    nodes: list[ast.expr | ast.keyword] = [*call.args, *call.keywords]
    if not nodes:
        return None

    def span(node: ast.expr) -> tuple[int, int]:
        return at(node.lineno, node.col_offset), at(_end(node), node.end_col_offset or 0)

    edits = [(*span(a), positional[i]) for i, a in enumerate(call.args) if i in positional]
    edits += [(*span(kw.value), changes[kw.arg]) for kw in call.keywords if kw.arg is not None and kw.arg in changes]
    written = {kw.arg for kw in call.keywords}
    new = [f"{k}={v}" for k, v in changes.items() if k not in written]
    if not new:
        return edits
    last = max(nodes, key=lambda n: (_end(n), n.end_col_offset or 0))
    end = at(_end(last), last.end_col_offset or 0)
    close = at(call.end_lineno or call.lineno, (call.end_col_offset or 1) - 1)  # the call's ``)``
    rest = data[end:close].decode("utf-8")
    skip = rest[:len(rest) - len(rest.lstrip(" \t)"))]  # a parenthesised argument's own ``)`` (ASCII)
    comma = data[end + len(skip):end + len(skip) + 1] == b","
    end += len(skip) + 1 if comma else skip.rfind(")") + 1
    rest = data[end:close].decode("utf-8")
    if "\n" not in rest:  # ``)`` on the last argument's line: the new ones after it
        return [*edits, (end, end, (" " if comma else ", ") + ", ".join(new) + ("," if comma else ""))]
    first = rest[:rest.index("\n")]  # the rest of the last argument's line: its comment
    newline = "\r\n" if first.endswith("\r") else "\n"
    line_text = lines[last.lineno - 1]
    pad = line_text[:len(line_text) - len(line_text.lstrip())]
    if last.lineno == call.lineno:  # the arguments start on the call's line: one level deeper
        pad += "    "
    brk = end + len(first.rstrip("\r").encode("utf-8"))
    text = "".join(f"{newline}{pad}{a}" + ("," if i < len(new) - 1 or comma else "") for i, a in enumerate(new))
    # without a comma after the last argument: one there, before its comment
    return [*edits, *([] if comma else [(end, end, ",")]), (brk, brk, text)]


def _apply(data: bytes, edits: list[tuple[int, int, str]]) -> str:
    """``data`` with the edits (byte spans, none overlapping) made, from the last one back
    (of two at one place, the later listed goes in first, so it ends up after the other)."""
    for _, (a, b, text) in sorted(enumerate(edits), key=lambda e: (e[1][0], e[1][1], e[0]), reverse=True):
        data = data[:a] + text.encode("utf-8") + data[b:]
    return data.decode("utf-8")


EDIT_SUFFIX = "_edit"
"""A fact ``X_edit`` holds, as data, the rewrite whose text the fact ``X`` shows
(:func:`edit_record`): ``diagnosis/shared_calls.py`` shows two findings' rewrites of one call as one."""


def edit_record(path: str, line: int, names: tuple[str, ...], changes: dict[str, str],
                rewrite: Rewrite) -> dict[str, Any]:
    """A rewrite of a call as plain data (a fact): where the call is, the keywords it sets,
    and the statement as shown, which another fix of the same call can be merged into."""
    return {"file": path, "line": line, "names": list(names), "changes": dict(changes), "after": rewrite.after}


def _dedent(text: str, indent: int) -> str:
    pad = " " * indent
    out = text.split("\n")
    return "\n".join([out[0]] + [t[indent:] if t.startswith(pad) else t for t in out[1:]])


def has_main_guard(tree: ast.Module) -> bool:
    """A top-level ``if __name__ == "__main__":`` (spawned workers re-import the script)."""
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            parts = [node.test.left, *node.test.comparators]
            if any(isinstance(p, ast.Name) and p.id == "__name__" for p in parts):
                return True
    return False


def short_path(path: str, cwd: object) -> str:
    """Relative to the run's working directory when inside it: what an editor opens."""
    if cwd and path.startswith(str(cwd).rstrip(os.sep) + os.sep):
        return os.path.relpath(path, str(cwd))
    return path
