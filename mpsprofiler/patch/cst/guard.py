"""The ``if __name__ == "__main__":`` guard spawned DataLoader workers need.

The largest edit, and the only one that moves code: it needs the module's scopes (what
each top-level statement binds and reads) to decide what may stay above the guard, so it
is a module of its own.
"""

from __future__ import annotations

from collections.abc import Mapping

import libcst as cst
from libcst.metadata import (
    Assignment,
    BuiltinScope,
    GlobalScope,
    MetadataWrapper,
    PositionProvider,
    ScopeProvider,
)

from .nodes import NotFound, _code, _expr, _has, _parse


def _stays(stmt: cst.BaseStatement) -> bool:
    """What a re-importing worker needs and may run: imports, definitions, constants (and a
    ``try:`` of those: ``try: import wandb`` / ``except ImportError: wandb = None``)."""
    if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
        return True
    if isinstance(stmt, cst.Try):
        blocks = [stmt.body, *(h.body for h in stmt.handlers), *(b.body for b in (stmt.orelse, stmt.finalbody) if b)]
        return all(isinstance(b, cst.IndentedBlock) and all(_stays(s) for s in b.body) for b in blocks)
    if isinstance(stmt, cst.SimpleStatementLine):
        for s in stmt.body:
            if isinstance(s, (cst.Import, cst.ImportFrom, cst.Pass)):
                continue
            if isinstance(s, cst.Expr) and isinstance(s.value, (cst.SimpleString, cst.ConcatenatedString)):
                continue
            if isinstance(s, (cst.Assign, cst.AnnAssign)) and s.value is not None and _no_calls(s.value):
                continue
            return False
        return True
    return False


def _no_calls(node: cst.CSTNode) -> bool:
    class V(cst.CSTVisitor):
        calls = 0

        def visit_Call(self, node: cst.Call) -> None:
            V.calls += 1

    node.visit(V())
    return V.calls == 0


DYNAMIC = frozenset({"exec", "eval", "globals", "vars", "locals", "setattr", "__import__"})
"""Calls through which top-level code may bind names no assignment shows (nanoGPT's
``exec(open('configurator.py').read())`` overrides the constants above it)."""

MODULE_NAMES = frozenset({"__name__", "__file__", "__doc__", "__spec__", "__loader__", "__package__",
                          "__builtins__", "__annotations__", "__cached__", "__path__"})


class _TopLevel:
    """For each top-level statement: the module-level names it binds and reads when it runs,
    and those its functions read later, when called (``later``)."""

    def __init__(self, module: cst.Module) -> None:
        import bisect
        import builtins

        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        positions = wrapper.resolve(PositionProvider)
        scopes = wrapper.resolve(ScopeProvider)
        body = module.body
        self.lines = [positions[s].start.line for s in body]
        starts = [(positions[s].start.line, positions[s].start.column) for s in body]
        n = len(body)
        self.binds: list[set[str]] = [set() for _ in range(n)]
        self.reads: list[set[str]] = [set() for _ in range(n)]
        self.later: list[set[str]] = [set() for _ in range(n)]
        self.bound_at: dict[str, list[tuple[int, bool]]] = {}
        """Name -> (statement, whether in a function's body) of each module-level binding."""
        self.star = [False] * n
        self.imports = [False] * n
        self.dynamic = [False] * n
        self._builtins = frozenset(dir(builtins)) | MODULE_NAMES
        bodies = [positions[node.body] for node in positions if isinstance(node, (cst.FunctionDef, cst.Lambda))]

        def where(node: cst.CSTNode) -> tuple[int, bool] | None:
            pos = positions.get(node)
            if pos is None:
                return None
            i = bisect.bisect_right(starts, (pos.start.line, pos.start.column)) - 1
            later = any((b.start.line, b.start.column) <= (pos.start.line, pos.start.column)
                        and (pos.end.line, pos.end.column) <= (b.end.line, b.end.column) for b in bodies)
            return (i, later) if i >= 0 else None

        for scope in {s for s in scopes.values() if s is not None}:
            if isinstance(scope, GlobalScope):
                for assignment in scope.assignments:
                    if isinstance(assignment, Assignment):
                        at = where(assignment.node)
                        if at is not None:
                            self.bound_at.setdefault(assignment.name, []).append(at)
                            if not at[1]:
                                self.binds[at[0]].add(assignment.name)
            for access in scope.accesses:
                node = access.node
                if not isinstance(node, cst.Name):
                    continue
                refs = list(access.referents)
                if refs and not any(isinstance(r.scope, (GlobalScope, BuiltinScope)) for r in refs):
                    continue  # a local of a function, class or comprehension
                at = where(node)
                if at is not None:
                    (self.later if at[1] else self.reads)[at[0]].add(node.value)
        for i, stmt in enumerate(body):
            self.star[i] = _has(stmt, (cst.ImportStar,))
            self.imports[i] = _has(stmt, (cst.Import, cst.ImportFrom))
            self.dynamic[i] = bool(self.reads[i] & DYNAMIC)


    def builtin(self, name: str) -> bool:
        return name in self._builtins


def has_main_guard(source: str) -> bool:
    module = _parse(source)
    return any(isinstance(s, cst.If) and "__name__" in _code(s.test) for s in module.body)


def add_main_guard(source: str, span: tuple[int, int] | None = None) -> str:
    """The top-level code that runs the training moved under ``if __name__ == "__main__":``
    (imports, definitions and constants stay at module level: spawned workers re-import the
    script and need them, and must not start the training again).

    Code moved under the guard runs after everything that stays, so a statement after it
    stays only where that cannot change what it does: everything it reads is bound above
    it by what stays (or is a builtin), nothing it binds is bound anywhere else, and it is
    no import (which may need what the code above it did: ``sys.path``, ``os.environ``).
    A constant that cannot stay moves under the guard, in its place; a function or class
    that cannot, an import after top-level code, or a Dataset (or ``collate_fn``,
    ``worker_init_fn``) that reads a name only the guarded code binds (a spawned worker
    would not find it) is refused with its line: the guard is the user's to place.

    ``span`` (first line, last line): the top-level code the finding's fix names
    (``framework_place.guard_span``): what is above it stays as written (set-up such as
    ``sys.path.insert`` before an import included), and a statement below it that cannot
    stay above the guard is refused, not moved: the guard covers that span, as the fix says."""
    module = _parse(source)
    if has_main_guard(source):
        raise NotFound("the script has an `if __name__ == \"__main__\":` guard already")
    top = _TopLevel(module)
    body = list(module.body)
    keep: list[cst.BaseStatement] = []
    move: list[cst.BaseStatement] = []
    kept: dict[str, str] = {}  # name -> what binds it above the guard ("import", "def", "value")
    kept_at: set[int] = set()
    moved_at: set[int] = set()
    star = dynamic = False
    for i, stmt in enumerate(body):
        why = None
        if span is not None and top.lines[i] < span[0]:  # above the code the fix names: as written
            keep.append(stmt)
            kept_at.add(i)
            kind = "def" if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) else "import" if top.imports[i] else "value"
            kept.update((name, kind) for name in top.binds[i])
            star = star or top.star[i]
            continue
        if span is not None and top.lines[i] > span[1]:
            why = _cannot_stay(top, i, kept, kept_at, star, dynamic) if _stays(stmt) else "it is top-level code"
            if why is not None:
                raise NotFound(f"line {top.lines[i]} comes after the top-level code (lines {span[0]} to {span[1]}) "
                               f"and cannot stay above the guard ({why})")
        if moved_at and _stays(stmt):
            why = _cannot_stay(top, i, kept, kept_at, star, dynamic)
            if why is not None and (isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) or top.imports[i]):
                raise NotFound(f"line {top.lines[i]} comes after top-level code (line {top.lines[min(moved_at)]}) "
                               f"and cannot stay above the guard ({why}), nor go under it (spawned workers need it)")
        if _stays(stmt) and why is None:
            if (moved_at and keep and isinstance(keep[-1], (cst.FunctionDef, cst.ClassDef))
                    and isinstance(stmt, cst.SimpleStatementLine) and not stmt.leading_lines):
                stmt = stmt.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])  # pulled up below a def
            keep.append(stmt)
            kept_at.add(i)
            kind = "def" if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)) else "import" if top.imports[i] else "value"
            kept.update((name, kind) for name in top.binds[i])
            star = star or top.star[i]
        else:
            move.append(stmt)
            moved_at.add(i)
            dynamic = dynamic or top.dynamic[i]
    if not move:
        raise NotFound("no top-level code to guard (the training runs elsewhere)")
    for i in sorted(kept_at):
        _worker_reads(module, top, i, moved_at)
    for at, moved in enumerate(move):  # a blank line under the guard gets no indent (no trailing spaces)
        if isinstance(moved, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            move[at] = moved.with_changes(leading_lines=[
                ln if ln.comment is not None else ln.with_changes(indent=False)
                for ln in moved.leading_lines if at or ln.comment is not None])
    guard = cst.If(test=_expr('__name__ == "__main__"'), body=cst.IndentedBlock(body=move),
                   leading_lines=[cst.EmptyLine(), cst.EmptyLine()] if keep else [])
    return module.with_changes(body=[*keep, guard]).code


def _cannot_stay(top: _TopLevel, i: int, kept: Mapping[str, str], kept_at: set[int], star: bool,
                 dynamic: bool) -> str | None:
    """Why statement ``i``, after code that moves under the guard, cannot run before that
    code (None: it can)."""
    if top.imports[i]:
        return "an import may need what that code does first: sys.path, os.environ"
    for name in sorted(top.reads[i]):
        bound = top.bound_at.get(name, [])
        if not bound:
            if top.builtin(name) or star:
                continue
            return f"it reads `{name}`, which no statement above it binds"
        if any(later or at not in kept_at for at, later in bound):
            return f"it reads `{name}`, which the code moved under the guard binds or may change"
        if dynamic and kept.get(name) == "value":
            return f"it reads `{name}`, which the top-level code above it may change (exec, globals())"
    for name in sorted(top.binds[i]):
        if top.builtin(name) or any(at != i for at, _ in top.bound_at.get(name, [])):
            return f"`{name}` is bound elsewhere too, so running it earlier would change which value wins"
    return None


WORKER_KEYWORDS = frozenset({"collate_fn", "worker_init_fn"})


def _worker_reads(module: cst.Module, top: _TopLevel, i: int, moved_at: set[int]) -> None:
    """Refuse when a kept Dataset/Sampler class (or a function passed as ``collate_fn`` or
    ``worker_init_fn``) reads, when called, a name bound only under the guard or in a
    function's body: in a spawned worker, which re-imports the script, it is not there."""
    stmt = module.body[i]
    if isinstance(stmt, cst.ClassDef):
        bases = " ".join(_code(b.value) for b in stmt.bases)
        methods = {s.name.value for s in stmt.body.body if isinstance(s, cst.FunctionDef)}
        if not ("Dataset" in bases or "Sampler" in bases or methods & {"__getitem__", "__iter__"}):
            return
    elif isinstance(stmt, cst.FunctionDef):
        if not _passed_as(module, stmt.name.value, WORKER_KEYWORDS):
            return
    else:
        return
    for name in sorted(top.later[i]):
        bound = top.bound_at.get(name, [])
        if any(later or at in moved_at for at, later in bound):
            raise NotFound(f"`{stmt.name.value}` (line {top.lines[i]}) reads `{name}`, which only the code going under "
                           "the guard (or a function's body) binds: DataLoader workers started by spawn re-import "
                           "the script and would not find it")


def _passed_as(module: cst.Module, name: str, keywords: frozenset[str]) -> bool:
    class V(cst.CSTVisitor):
        found = False

        def visit_Arg(self, node: cst.Arg) -> None:
            if node.keyword is not None and node.keyword.value in keywords and _code(node.value) == name:
                V.found = True

    module.visit(V())
    return V.found
