"""A call's argument that is the script's command-line option (``num_workers=args.workers``,
``parser.add_argument("--workers", ...)``): the fix then says how to run the script, with the
option, instead of showing a line that writes the number over it.

The finding's code and ``mpsprof patch`` take this module's decision (:func:`call_option`):
the line keeps ``args.workers`` and the finding says ``run with --workers 2``; the patch
moves the number to the option's default only where that changes nothing but this call
(:attr:`Option.movable`; :mod:`mpsprofiler.patch.cst.options` makes the edit), else leaves
the line and says how to run. Writing the number over the option made the option silently
do nothing, and over an option a second loader reads, made it drive that loader alone. The
same for the module's hyperparameters (``self.hparams.num_workers``, Lightning): the
number belongs where the module is built. Read with :mod:`ast`; any doubt (the option
defined twice, no flag) and there is no option.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass

from .source_edit import find_call, read_tree


@dataclass(frozen=True)
class Option:
    flag: str
    """The option as typed (``--workers``; the last of its spellings, as argparse lists them);
    for hyperparameters, their name (``num_workers``)."""
    expr: str
    """What the call reads (``args.workers``, ``self.hparams.num_workers``)."""
    line: int
    """The ``add_argument`` line that defines it; for hyperparameters, the line of the
    enclosing class's ``__init__`` parameter of that name (its default), 0 where none."""
    ran_with: str | None
    """The value the run's command line gave it (``"0"``), None where the default ran."""
    others: tuple[int, ...] = ()
    """Lines of the other calls handed the same option (a validation loader's): its value
    changes them too."""
    hparams: bool = False
    """The value is the module's hyperparameters (``self.hparams.num_workers``, Lightning's
    ``save_hyperparameters()``): set where the module is built, not on the command line."""

    @property
    def movable(self) -> bool:
        """The number may become the option's default: argparse's, read by this call alone, and
        the run took the default (a default set where another loader reads it, or that this run
        did not use, would change something else than what was measured)."""
        return not self.hparams and not self.others and self.ran_with is None


def call_option(path: str, line: int, names: tuple[str, ...], keyword: str, argv: Sequence[str]) -> Option | None:
    """Where the call at ``path:line`` takes ``keyword`` from, or None (a literal, anything
    else): the script's command-line option (``args.workers``) or the module's
    hyperparameters (``self.hparams.num_workers``). The one decision both the finding's
    code (loader_place.py) and ``mpsprof patch`` (patch/plan.py) follow: the line keeps it."""
    read = read_tree(path)
    if read is None:
        return None
    _, tree = read
    found = find_call(tree, line, names)
    if found is None:
        return None
    value = next((kw.value for kw in found[1].keywords if kw.arg == keyword), None)
    hparam = _hparam(value)
    if hparam is not None and value is not None:
        return Option(hparam, ast.unparse(value), _init_default(tree, found[1], hparam), None, hparams=True)
    if not (isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name)):
        return None
    namespace, dest = value.value.id, value.attr
    defining = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and call_name_is(c, "add_argument")
                and _dest(c) == dest]
    if len(defining) != 1:
        return None
    flags = _flags(defining[0])
    if not flags:
        return None
    others = tuple(sorted(n.lineno for n in _readers(tree, namespace, dest) if n is not found[1]))
    return Option(flags[-1], f"{namespace}.{dest}", defining[0].lineno, _ran_with(flags, argv), others)


def _hparam(value: ast.expr | None) -> str | None:
    """``x.hparams.name`` or ``x.hparams["name"]``: the hyperparameter's name."""
    if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Attribute) and value.value.attr == "hparams":
        return value.attr
    if (isinstance(value, ast.Subscript) and isinstance(value.value, ast.Attribute) and value.value.attr == "hparams"
            and isinstance(value.slice, ast.Constant) and isinstance(value.slice.value, str)):
        return value.slice.value
    return None


def _init_default(tree: ast.Module, call: ast.Call, name: str) -> int:
    """The line of the ``__init__`` parameter ``name`` (with a default) of the class whose
    method holds ``call``, where ``save_hyperparameters()`` takes it from; 0 where none."""
    for cls in ast.walk(tree):
        if not isinstance(cls, ast.ClassDef) or not any(n is call for n in ast.walk(cls)):
            continue
        for fn in cls.body:
            if isinstance(fn, ast.FunctionDef) and fn.name == "__init__":
                args = [*fn.args.posonlyargs, *fn.args.args]
                with_default = args[len(args) - len(fn.args.defaults):]
                kw = [a for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults, strict=True) if d is not None]
                for a in [*with_default, *kw]:
                    if a.arg == name:
                        return a.lineno
    return 0


def call_name_is(node: ast.Call, name: str) -> bool:
    return isinstance(node.func, ast.Attribute) and node.func.attr == name


def _readers(tree: ast.Module, namespace: str, dest: str) -> list[ast.Call]:
    """Calls handed the option as an argument (a print of it counts: it would change too)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        for value in [*node.args, *(kw.value for kw in node.keywords)]:
            if (isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name)
                    and value.value.id == namespace and value.attr == dest):
                found.append(node)
                break
    return found


def _flags(call: ast.Call) -> list[str]:
    return [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
            and a.value.startswith("-")]


def _dest(call: ast.Call) -> str | None:
    """The attribute ``add_argument`` stores into, as argparse derives it."""
    for kw in call.keywords:
        if kw.arg == "dest" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
            return kw.value.value
    flags = _flags(call)
    long = [f for f in flags if f.startswith("--")]
    chosen = long[0] if long else (flags[0] if flags else None)
    return chosen.lstrip("-").replace("-", "_") if chosen else None


def _ran_with(flags: list[str], argv: Sequence[str]) -> str | None:
    """The option's value on the run's command line (the last one given wins, as in argparse)."""
    value: str | None = None
    for i, a in enumerate(argv):
        for f in flags:
            if a == f and i + 1 < len(argv):
                value = argv[i + 1]
            elif a.startswith(f + "=") and f.startswith("--"):
                value = a[len(f) + 1:]
    return value
