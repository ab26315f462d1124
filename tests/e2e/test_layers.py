"""The layers of docs/architecture.md, checked: data flows down only, and the probe stays light.

The import graph is read from the source with ``ast`` (every import counts, also those inside
functions: a lazy import is still a dependency), so a change that makes the session read
launcher internals, or the probe pull in the TUI, fails here instead of in review.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from helpers import child_env

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "mpsprofiler"

# A part is the first name below mpsprofiler: a subpackage or a top-level module.
LEAVES = {"events", "units", "redact", "environment", "resources", "mdtext", "__version__", "(root)"}
"""Parts every layer may use: the wire format, formatting helpers (units; mdtext, Markdown that quotes the script), redaction, machine facts,
where the shipped files are (resources) and the package root (``mpsprofiler.step`` and ``__version__``)."""

ALLOWED: dict[str, set[str]] = {
    "events": set(),
    "units": set(),
    "redact": set(),
    "environment": set(),
    "devices": {"environment"},
    "kernels": set(),
    "probe": {"devices", "kernels", "probe"},
    "rundir": set(),
    "session": {"kernels", "rundir"},
    "diagnosis": {"session", "devices", "kernels", "rundir"},  # rundir: the guarded reader (imports nothing)
}
"""What each lower layer may import besides LEAVES. Parts not named here (launcher, views,
cli, doctor, bench) may import anything except what FORBIDDEN says."""

FORBIDDEN: dict[str, set[str]] = {
    "launcher": {"tui", "cli", "report"},  # the launcher hands data back; its callers render
    "report": {"tui", "launcher", "cli"},
    "results": {"tui", "cli"},
    "tui": {"cli"},
}


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "(root)"


def import_graph() -> dict[str, set[str]]:
    """part -> the parts it imports (mpsprofiler only); a copy of its own for each caller."""
    return {part: set(parts) for part, parts in _import_graph().items()}


@functools.cache
def _import_graph() -> dict[str, set[str]]:
    """The graph, read once per test process (~150 files parsed: about a second of CPU,
    which each of the parametrized tests below paid again)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(REPO).with_suffix("").parts
        module = ".".join(rel[:-1] if rel[-1] == "__init__" else rel)
        for source, names in imports_of(path, module):
            targets = [f"mpsprofiler.{name}" for name in names] if source == "mpsprofiler" else [source]
            for target in targets:
                if target == "mpsprofiler" or target.startswith("mpsprofiler."):
                    graph[_part(module)].add(_part(target))
    return graph


def imports_of(path: Path, module: str) -> list[tuple[str, list[str]]]:
    """Every import statement in ``path`` (module ``module``), anywhere in the file (lazy
    ones and TYPE_CHECKING ones too), as (absolute module imported from, names):
    ``from .x import a, b`` -> ("pkg.x", ["a", "b"]); ``import a.b`` -> ("a.b", [])."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            found.append((source, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
    return found


def test_the_graph_is_read() -> None:
    graph = import_graph()
    assert "events" in graph["probe"] and "session" in graph["diagnosis"]


@pytest.mark.parametrize("part", sorted(ALLOWED))
def test_lower_layers_import_only_what_is_below_them(part: str) -> None:
    imported = import_graph().get(part, set()) - {part}
    extra = imported - ALLOWED[part] - LEAVES
    assert not extra, f"mpsprofiler/{part} imports {sorted(extra)}: above it in the layers"


@pytest.mark.parametrize("part", sorted(FORBIDDEN))
def test_views_and_launcher_keep_their_direction(part: str) -> None:
    bad = import_graph().get(part, set()) & FORBIDDEN[part]
    assert not bad, f"mpsprofiler/{part} imports {sorted(bad)}"


def test_no_import_cycle_between_parts() -> None:
    graph = {k: v - {k} - {"(root)", "__version__"} for k, v in import_graph().items()}
    cycles = []

    def visit(node: str, path: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt in path:
                cycles.append(path[path.index(nxt):] + [nxt])
            elif len(path) < 12:
                visit(nxt, path + [nxt])

    for start in sorted(graph):
        visit(start, [start])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles[:5])


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(REPO).with_suffix("").parts
        found[".".join(rel[:-1] if rel[-1] == "__init__" else rel)] = path
    return found


def module_graph() -> dict[str, set[str]]:
    """module -> the mpsprofiler modules it imports, every import counted (lazy ones and those
    under ``TYPE_CHECKING`` too). ``from pkg import name`` points at ``pkg.name`` when that is a
    module, else at ``pkg``; the implicit import of a package's ``__init__`` by its submodules
    is not an edge (Python finishes that one first)."""
    modules = _modules()

    def resolve(name: str) -> str:
        while name and name not in modules:
            name = name.rsplit(".", 1)[0] if "." in name else ""
        return name

    graph: dict[str, set[str]] = defaultdict(set)
    for module, path in modules.items():
        for source, names in imports_of(path, module):
            targets = [f"{source}.{n}" if f"{source}.{n}" in modules else source for n in names] or [source]
            for target in targets:
                if target == "mpsprofiler" or target.startswith("mpsprofiler."):
                    resolved = resolve(target)
                    if resolved and resolved != module:
                        graph[module].add(resolved)
    return graph


def module_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert module_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert module_cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_between_modules() -> None:
    """Not only parts: no two modules of mpsprofiler may import each other, directly or around
    a circle, however lazily (a function-level import still ties the two together)."""
    graph = module_graph()
    assert "mpsprofiler.diagnosis.conditions" in graph["mpsprofiler.diagnosis.rule_check"]
    cycles = module_cycles(graph)
    assert not cycles, "module import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


@pytest.mark.slow
def test_profiled_script_never_imports_the_ui_stack(tmp_path: Path) -> None:
    """The probe runs inside the training process: textual, rich and yaml stay out of it."""
    script = tmp_path / "which.py"
    script.write_text(
        "import sys, torch\n"
        "m = torch.nn.Linear(2, 1); opt = torch.optim.SGD(m.parameters(), 0.1)\n"
        "for _ in range(3):\n"
        "    m(torch.ones(1, 2)).sum().backward(); opt.step(); opt.zero_grad()\n"
        "print(sorted(n for n in ('textual', 'rich', 'yaml', 'simpleeval') if n in sys.modules))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "mpsprofiler", "run", "--headless", "-o", str(tmp_path / "run"), str(script)],
        capture_output=True, env=child_env(), timeout=120, stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode().strip() == "[]"
