"""The line that makes float64, rewritten to float32, and the script's other float64 makers.

The op sampler names the lines whose ops run in float64 (``float64_top_line``); the tensor
usually became float64 earlier, where NumPy's default dtype entered torch:
``torch.from_numpy`` keeps NumPy's float64 (``torch/csrc/utils/tensor_numpy.cpp``,
``tensor_from_numpy``: the dtype is the array's), ``.double()`` and ``dtype=torch.float64``
ask for it. Of the sampled float64 sites, the first whose line holds one of those is the
one to change; its statement is rewritten in place (``.float()`` after ``from_numpy``,
``float32`` for ``float64``), and ``float64_fix_where`` says which (``line``; ``makers`` when no
such line was sampled but the script's file makes float64 elsewhere, listed rewritten;
``enters_torch`` when neither is known; ``default`` when the script made float64 torch's default
dtype: that call, found by :func:`default_setter`, which `mpsprof patch` rewrites too, is the line), a code ``rules/ops.yaml`` words. A model made float64 with
``.double()`` before the first sampled step is not seen by the sampler: the script's other
such lines are listed from its source.
"""

from __future__ import annotations

import ast
import os
from typing import Any

from ...session.session import Session
from .registry import analyzer
from .source_edit import read_tree, short_path

FLOAT64_FIX_FACTS: tuple[str, ...] = ("float64_fix_code", "float64_fix_place", "float64_fix_where")
MAX_OTHERS = 3


def _float32(source: str, stmt: ast.stmt) -> str | None:
    """The one-line statement with its float64 makers made float32, or None when it has none."""
    text = ast.get_source_segment(source, stmt)
    if text is None or "\n" in text:
        return None
    # ast's col_offset and end_col_offset count UTF-8 bytes, not characters: a non-ASCII
    # character earlier on the line (``"é"``, a Chinese comment) would shift a str slice,
    # so the edits are made on the statement's bytes
    raw = text.encode("utf-8")
    edits: list[tuple[int, int, str]] = []  # (start, end, replacement) in the statement's bytes
    base = stmt.col_offset
    for node in ast.walk(stmt):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.end_col_offset is not None:
            if node.func.attr == "from_numpy" and not _converted(stmt, node):
                edits.append((node.end_col_offset - base, node.end_col_offset - base, ".float()"))
            elif node.func.attr == "double" and not node.args and node.func.end_col_offset is not None:
                edits.append((node.func.end_col_offset - base - len("double"), node.end_col_offset - base,
                              "float()"))
        elif (isinstance(node, ast.Attribute) and node.attr in ("float64", "double") and isinstance(node.value, ast.Name)
              and node.value.id == "torch" and node.end_col_offset is not None):
            edits.append((node.end_col_offset - base - len(node.attr), node.end_col_offset - base, "float32"))
    if not edits:
        return None
    for start, end, new in sorted(set(edits), reverse=True):
        raw = raw[:start] + new.encode("utf-8") + raw[end:]
    return raw.decode("utf-8")


DTYPE_METHODS = frozenset({"float", "half", "bfloat16", "double", "int", "long", "short", "bool", "byte", "char",
                           "cfloat", "cdouble", "type"})
"""Methods whose result has a dtype of their own: after one of them the tensor is no longer
NumPy's float64 (``.double()`` is rewritten to ``.float()`` on its own)."""

DTYPES = frozenset({"float32", "float", "float16", "half", "bfloat16", "float64", "double", "int8", "int16",
                    "int32", "int64", "int", "long", "short", "uint8", "bool", "complex64", "cfloat"})
"""``torch.<name>`` dtypes: a ``.to(...)`` given one sets the dtype (``torch.float64`` is
rewritten to ``torch.float32`` on its own)."""


def _converted(stmt: ast.stmt, call: ast.Call) -> bool:
    """Whether the ``from_numpy`` result gets a dtype of its own in the same statement:
    ``.float()``, ``.half()``, ``.to(torch.float32)``, ``.to(dtype=torch.float32)``,
    ``.to(device, torch.float32)``, anywhere in the chain of calls on it. ``.to(device)``
    alone only moves it and keeps float64: not converted."""
    parents = {id(child): node for node in ast.walk(stmt) for child in ast.iter_child_nodes(node)}
    node: ast.expr = call
    while True:
        attr = parents.get(id(node))
        method = parents.get(id(attr)) if isinstance(attr, ast.Attribute) else None
        if not isinstance(attr, ast.Attribute) or not isinstance(method, ast.Call) or method.func is not attr:
            return False
        if attr.attr in DTYPE_METHODS:
            return True
        if attr.attr == "to" and (any(k.arg == "dtype" for k in method.keywords) or any(_dtype(a) for a in method.args)):
            return True
        node = method


def _dtype(node: ast.expr) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr in DTYPES and isinstance(node.value, ast.Name)
            and node.value.id == "torch")


def _statement(tree: ast.Module, line: int) -> ast.stmt | None:
    best = None
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node.lineno == line == node.end_lineno:
            best = node  # the innermost one-line statement on that line
    return best


DEFAULT_SETTERS = frozenset({"set_default_dtype", "set_default_tensor_type"})
"""torch's calls that make every new float tensor float64 (``torch.set_default_dtype(torch.float64)``,
the older ``torch.set_default_tensor_type(torch.DoubleTensor)``)."""


def default_setter(session: Session) -> tuple[str, int, str, str] | None:
    """(file, line, the statement, the statement rewritten) of the script's one-line call that made torch's
    default dtype float64, when the first step ran with that default (the ``model`` event's
    ``default_dtype``): then float64 comes from every factory call (``torch.randn``,
    ``nn.Linear``'s weights), and that call is the one line to change. Searched in the
    script and the files of the sampled float64 lines; None when none or several are found."""
    if session.model.get("default_dtype") != "float64":
        return None
    cwd = str(session.run.get("cwd") or "")
    script = session.run.get("script")
    files = [os.path.join(cwd, str(script))] if script else []
    files += [site.file for site in session.ops.top_float64(5) if site.file]
    found: list[tuple[str, int, str, str]] = []
    for file in dict.fromkeys(os.path.abspath(f) for f in files):
        read = read_tree(file)
        if read is None:
            continue
        source, tree = read
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in DEFAULT_SETTERS and len(node.args) == 1):
                continue
            stmt = _statement(tree, node.lineno)
            text = ast.get_source_segment(source, stmt) if stmt is not None else None
            if stmt is None or text is None:
                continue
            if node.func.attr == "set_default_dtype":
                new = _float32(source, stmt)
            elif isinstance(stmt, ast.Expr) and stmt.value is node and "Double" in ast.unparse(node.args[0]):
                new = f"{ast.unparse(node.func.value)}.set_default_dtype({ast.unparse(node.func.value)}.float32)"
            else:
                new = None
            if new is not None:
                found.append((file, stmt.lineno, text, new))
    return found[0] if len(found) == 1 else None


@analyzer("float64_fix", provides=FLOAT64_FIX_FACTS)
def float64_fix_facts(session: Session) -> dict[str, Any]:
    cwd = session.run.get("cwd")
    setter = default_setter(session)
    if setter is not None:
        file, line, _, code = setter
        read = read_tree(file)
        others = _other_makers(read[0], read[1], line) if read else []
        if others:
            code += "\n\n# and the script's other float64 makers:\n" + "\n".join(
                f"{text}  # line {at}" for at, text in others)
        return {"float64_fix_place": f"{short_path(file, cwd)}:{line}", "float64_fix_code": code,
                "float64_fix_where": "default"}  # a code rules/ops.yaml words
    for site in session.ops.top_float64(5):
        read = read_tree(site.file) if site.file else None
        stmt = _statement(read[1], site.line) if read else None
        new = _float32(read[0], stmt) if read and stmt else None
        if read is None or new is None:
            continue
        place = f"{short_path(site.file, cwd)}:{site.line}"
        code = new
        others = _other_makers(read[0], read[1], site.line)
        if others:
            code += "\n\n# and the script's other float64 makers:\n" + "\n".join(
                f"{text}  # line {line}" for line, text in others)
        return {"float64_fix_place": place, "float64_fix_code": code,
                "float64_fix_where": "line"}  # a code rules/ops.yaml words
    if session.ops.float64_calls <= 0:
        return {}
    # no line that makes it was sampled (or its source is gone): the script's lines that
    # make float64, rewritten; else where an array enters torch, in general
    makers = _makers_of(session)
    if makers:
        # the script's own lines only: the general `torch.from_numpy(array)` line beside
        # them named an `array` the script has not (sweep s52 a12)
        return {"float64_fix_place": None, "float64_fix_where": "makers", "float64_fix_code": makers}
    code = ("x = torch.from_numpy(array).float().to(device)   # not .to(device) on a float64 tensor\n"
            "torch.set_default_dtype(torch.float32)")
    return {"float64_fix_place": None, "float64_fix_where": "enters_torch", "float64_fix_code": code}


def _makers_of(session: Session) -> str:
    """The float64 makers of the file of the top sampled float64 line, rewritten, one a
    line with its number (``""``: none): the line that runs float64 ops often makes none
    itself (``stats = 0.99 * stats + ...``) while the tensor it reads was made float64
    earlier, before the first sampled step (``stats = torch.from_numpy(np.zeros(65))``)."""
    sites = session.ops.top_float64(1)
    read = read_tree(sites[0].file) if sites and sites[0].file else None
    others = _other_makers(read[0], read[1], 0) if read else []
    return "\n".join(f"{text}  # line {at}" for at, text in others)


def _other_makers(source: str, tree: ast.Module, skip: int) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node.lineno == node.end_lineno and node.lineno != skip \
                and not isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.If, ast.For, ast.While, ast.With)):
            new = _float32(source, node)
            if new is not None and (node.lineno, new) not in out:
                out.append((node.lineno, new))
    return sorted(out)[:MAX_OTHERS]


def other_maker_lines(source: str, skip: int) -> list[int]:
    """The lines of the other float64 makers the fix text names beside line ``skip`` of
    ``source``: `mpsprof patch` rewrites them with it, since one left float64 keeps the
    arithmetic that meets it float64 (type promotion), and a Mac raises there still."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    return [line for line, _ in _other_makers(source, tree, skip)]
