"""Edits at the top of a module: an ``import``, ``os.environ[...]`` before ``import
torch``, a statement right after the import that binds a module.

Their own module because where a line goes at the top matters more than the line: after
the docstring and ``__future__`` imports, before torch is imported for the variables torch
reads when it starts, under the name the script binds the module to.
"""

from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper, ScopeProvider

from .nodes import NotFound, _code, _header_end, _insert_top, _parse


def ensure_import(source: str, name: str) -> str:
    """``import name`` after the module's docstring and ``__future__`` imports, unless the
    module imports it at top level already."""
    module = _parse(source)
    for stmt in module.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for s in stmt.body:
                if isinstance(s, cst.Import) and any(_code(a.name) == name and a.asname is None for a in s.names):
                    return source
    return _insert_top(module, [cst.parse_statement(f"import {name}\n")])


def _is_import_os(stmt: cst.BaseStatement) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], cst.Import) and any(
        _code(a.name) == "os" and a.asname is None for a in stmt.body[0].names)


def set_environ_first(source: str, values: dict[str, str]) -> str:
    """``os.environ[NAME] = "value"`` for each pair at the top of the script, before any
    import (torch reads these when MPS starts: after that a change does nothing); a top-level
    assignment of one of them already in the script gets the new value instead."""
    module = _parse(source)
    body = list(module.body)
    left = dict(values)
    for i, stmt in enumerate(body):
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            continue
        s = stmt.body[0]
        if isinstance(s, cst.Assign) and len(s.targets) == 1 and isinstance(s.targets[0].target, cst.Subscript):
            key = _code(s.targets[0].target).replace(" ", "").replace("'", '"')
            for name in list(left):
                if key == f'os.environ["{name}"]':
                    body[i] = stmt.with_changes(body=[s.with_changes(value=cst.SimpleString(f'"{left.pop(name)}"'))])
    module = module.with_changes(body=body)
    if not left:
        return module.code
    lines: list[cst.BaseStatement] = [cst.parse_statement(
        f'os.environ["{k}"] = "{v}"  # read when MPS starts: before `import torch`\n') for k, v in left.items()]
    at = _header_end(module.body)
    if at < len(module.body) and _is_import_os(module.body[at]):
        return _insert_top(module, lines, at + 1)  # ``import os`` first in the script already
    return _insert_top(module, [cst.parse_statement("import os\n"), *lines], at)


def insert_after_import(source: str, module_name: str, statement: str) -> str:
    """``statement`` right after the first top-level import that binds ``module_name``, its
    ``{name}`` the name it is bound to there (``import torch as th``: ``th``); where the
    module is only imported ``from``, ``import module_name`` is added with it (when that
    name is free in the script)."""
    module = _parse(source)
    body = list(module.body)
    for i, stmt in enumerate(body):
        bound = _binds_module(stmt, module_name)
        if bound:
            body.insert(i + 1, cst.parse_statement(statement.format(name=bound) + "\n"))
            return module.with_changes(body=body).code
    for i, stmt in enumerate(body):
        if isinstance(stmt, cst.SimpleStatementLine) and any(
                isinstance(s, cst.ImportFrom) and s.module is not None
                and _code(s.module).split(".")[0] == module_name for s in stmt.body):
            if _name_used(module, module_name):
                raise NotFound(f"the script uses the name `{module_name}` for something else than the module")
            body[i + 1:i + 1] = [cst.parse_statement(f"import {module_name}\n"),
                                 cst.parse_statement(statement.format(name=module_name) + "\n")]
            return module.with_changes(body=body).code
    raise NotFound(f"the script has no top-level `import {module_name}`")


def _binds_module(stmt: cst.BaseStatement, module_name: str) -> str | None:
    """The name ``stmt`` binds ``module_name`` to: ``import torch`` and ``import torch.nn``
    bind ``torch``, ``import torch as th`` binds ``th`` (``import torch.nn as nn``: none)."""
    if not isinstance(stmt, cst.SimpleStatementLine):
        return None
    for s in stmt.body:
        if isinstance(s, cst.Import):
            for a in s.names:
                dotted = _code(a.name)
                if a.asname is not None:
                    if dotted == module_name and isinstance(a.asname.name, cst.Name):
                        return a.asname.name.value
                elif dotted.split(".")[0] == module_name:
                    return module_name
    return None


def _name_used(module: cst.Module, name: str) -> bool:
    """Whether any scope of ``module`` binds or reads ``name``."""
    scopes = MetadataWrapper(module, unsafe_skip_copy=True).resolve(ScopeProvider)
    return any(scope is not None and (name in scope.assignments or name in scope.accesses)
               for scope in set(scopes.values()))
