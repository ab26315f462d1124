"""One line that builds two loaders in a loop: the settings for the slow one only.

``for split in ("train", "val"): loaders[split] = DataLoader(...)`` (or the comprehension
``{split: DataLoader(...) for split in ("train", "val")}``) builds the training and
the validation loader at one line. Changed as it is written, both would get the workers
(each worker of a validation loader read a few times an epoch costs its memory for
nothing). Where the loop runs over a literal list of values, and each pass built one of
the loaders recorded at that line, the order they were built in (their construction
numbers) tells which value built the slow one; the settings then read the loop's variable:
``num_workers=7 if split == "train" else 0``. Otherwise (the values come from elsewhere,
the counts do not match) there is no condition to write, and the texts say to set them for
that loader only.

Shared by the finding's fix (:mod:`.loader_place`) and ``mpsprof patch`` (patch/plan.py),
so both write the same condition.
"""

from __future__ import annotations

import ast

from ...events.payloads import DataLoaderFields
from ...session.session import Session
from .common import num
from .source_edit import find_call, read_tree

DEFAULTS = {"num_workers": "0", "persistent_workers": "False", "prefetch_factor": "None", "pin_memory": "False"}
"""DataLoader's defaults: the other passes' values where the call does not set them
(``prefetch_factor`` must stay None without workers: torch raises ValueError)."""


def loop_of(session: Session, loader: DataLoaderFields) -> tuple[str, int, str | None] | None:
    """(the loop's variable, the loop's line, the condition for this loader's pass or None)
    where the loader's line sits in a ``for`` loop or a comprehension's element; None where
    it does not (or the file cannot be read)."""
    file, line = loader.get("file"), num(loader.get("line"))
    if not file or not line:
        return None
    read = read_tree(str(file))
    if read is None:
        return None
    source, tree = read
    loops = _loops_at(tree, int(line))
    if not loops:
        return None
    loop = max(loops, key=lambda n: _line(n))  # the innermost
    names = _targets(loop.target)
    if not names:
        return None
    var = ast.get_source_segment(source, loop.target) or names[0]
    return var, _line(loop), _condition(session, loader, loop, names, source)


COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


def _loops_at(tree: ast.AST, line: int) -> list[ast.For | ast.comprehension]:
    """The loops that run ``line`` once a pass: a ``for`` whose body holds it, and a
    comprehension of one ``for`` whose element does (``{s: DataLoader(...) for s in
    ("train", "val")}`` builds a loader a pass just as the ``for`` statement does)."""
    loops: list[ast.For | ast.comprehension] = []
    for n in ast.walk(tree):
        if isinstance(n, ast.For) and any(s.lineno <= line <= (s.end_lineno or s.lineno) for s in n.body):
            loops.append(n)
        elif isinstance(n, COMPREHENSIONS) and len(n.generators) == 1 and not n.generators[0].ifs:
            element = [n.key, n.value] if isinstance(n, ast.DictComp) else [n.elt]
            if any(e.lineno <= line <= (e.end_lineno or e.lineno) for e in element):
                loops.append(n.generators[0])
    return loops


def _line(node: ast.For | ast.comprehension) -> int:
    return node.lineno if isinstance(node, ast.For) else node.target.lineno


def _targets(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Name) for e in target.elts):
        return [e.id for e in target.elts if isinstance(e, ast.Name)]
    return []


def _condition(session: Session, loader: DataLoaderFields, loop: ast.For | ast.comprehension, names: list[str],
               source: str) -> str | None:
    """``name == value`` true only in the pass that built ``loader``: the loop runs over a
    literal list of constants (or of tuples of them), each pass built one loader at the
    line, so the loader's place in the construction order is its pass."""
    if not isinstance(loop.iter, (ast.Tuple, ast.List)):
        return None
    rows: list[list[ast.expr]] = []
    for elt in loop.iter.elts:
        parts = elt.elts if len(names) > 1 and isinstance(elt, (ast.Tuple, ast.List)) else [elt]
        if len(parts) != len(names) or not all(isinstance(p, ast.Constant) for p in parts):
            return None
        rows.append(list(parts))
    same = sorted((d for d in session.dataloaders.values()
                   if d.get("file") == loader.get("file") and d.get("line") == loader.get("line")
                   and same_call(d, loader)), key=lambda d: num(d.get("created")) or 0)
    if len(same) != len(rows) or any(len(d.get("created_all") or []) > 1 for d in same) or loader not in same:
        return None  # not one loader per pass (the loop ran more than once, or rebuilt them)
    at = same.index(loader)
    for k, name in enumerate(names):
        values = [ast.literal_eval(r[k]) for r in rows]
        if values.count(values[at]) == 1:
            return f"{name} == {ast.get_source_segment(source, rows[at][k]) or repr(values[at])}"
    return None


def same_call(a: DataLoaderFields, b: DataLoaderFields) -> bool:
    """Built through the same call of the function that holds the line (``main()``): one pass
    of its loop each, not a helper called once per loader (``make_loader`` at two lines)."""
    return (a.get("call_file"), a.get("call_line")) == (b.get("call_file"), b.get("call_line"))


def conditional(loader: DataLoaderFields, changes: dict[str, str], cond: str) -> dict[str, str] | None:
    """``changes`` (keyword -> value text) for the pass that built ``loader`` only (``cond``,
    the condition :func:`loop_of` found for it), the other passes keeping what the call says
    (or DataLoader's default); None where the call passes arguments by position past the
    dataset (not read here)."""
    read = read_tree(str(loader.get("file")))
    call = find_call(read[1], int(num(loader.get("line")) or 0), ("DataLoader",)) if read else None
    if read is None or call is None or len(call[1].args) > 2:
        return None
    written = {k.arg: ast.get_source_segment(read[0], k.value) for k in call[1].keywords if k.arg}
    out: dict[str, str] = {}
    for key, value in changes.items():
        other = written.get(key) or DEFAULTS.get(key)
        if other is None:
            return None
        if value == "True" and other == "False":
            out[key] = cond
        else:
            out[key] = f"{value} if {cond} else {other}"
    return out
