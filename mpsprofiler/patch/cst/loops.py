"""A statement put first in a loop's body: where a value carried from one step into the
next is cut from its history (``hidden = repackage_hidden(hidden)``, the graph-carried-crash
fix), before anything in the body reads it."""

from __future__ import annotations

import libcst as cst

from .nodes import NotFound, _innermost, _parse, _replace


def first_in_loop(source: str, line: int, statement: str) -> str:
    """``statement`` as the first statement of the innermost ``for``/``while`` loop spanning
    ``line`` (its header's line, as the finding names it; the body's comments and blank
    lines stay where they were, above their statement); a loop whose body sits on its
    header line (``for x in y: f(x)``) is refused."""
    module = _parse(source)
    loops = _innermost(module, line, lambda n: isinstance(n, (cst.For, cst.While)))
    if not loops:
        raise NotFound(f"no for or while loop at line {line}")
    loop = loops[0]
    assert isinstance(loop, (cst.For, cst.While))
    if not isinstance(loop.body, cst.IndentedBlock):
        raise NotFound(f"the loop at line {line} has its body on the same line; put it on lines of its own")
    new = cst.parse_statement(statement + "\n")
    body = loop.body.with_changes(body=[new, *loop.body.body])
    return _replace(module, loop, loop.with_changes(body=body))


def define_after_imports(source: str, module_name: str, definition: str) -> str:
    """``definition`` (a function, its ``{name}`` the name ``module_name`` is bound to) after
    the imports that follow the script's top-level ``import module_name``, set apart by blank
    lines (``import torch as th``: ``{name}`` is ``th``)."""
    from .imports import _binds_module

    module = _parse(source)
    body = list(module.body)
    at = next((i for i, stmt in enumerate(body) if _binds_module(stmt, module_name)), None)
    if at is None:
        raise NotFound(f"the script has no top-level `import {module_name}`")
    bound = _binds_module(body[at], module_name)
    after = at + 1
    while after < len(body) and isinstance(body[after], cst.SimpleStatementLine) and all(
            isinstance(s, (cst.Import, cst.ImportFrom)) for s in body[after].body):  # type: ignore[union-attr]
        after += 1
    blank = [cst.EmptyLine(), cst.EmptyLine()]
    new = cst.parse_statement(definition.format(name=bound) + "\n").with_changes(leading_lines=blank)
    if after < len(body):  # what followed the imports keeps two blank lines above it
        body[after] = body[after].with_changes(leading_lines=blank)
    return module.with_changes(body=[*body[:after], new, *body[after:]]).code
