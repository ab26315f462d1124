"""The script itself as the child's main program: no frame of mpsprof's below it.

``python FILE`` runs a compiled file (a ``.pyc``) as ``__main__`` just as it runs a source
file (``pymain_run_file`` -> ``run_pyc_file`` in CPython's Python/pythonrun.c). mpsprof
compiles the user's script into such a file with two additions made in the syntax
tree, both on the script's own code object, so the script's module frame is the
outermost frame, as under ``python SCRIPT``: ``inspect.stack()`` at the top level is 1
deep, the recursion limit reads python's and the usable depth is python's, a
``stacklevel`` past the top ends at ``sys:1``.

* After the docstring and the ``__future__`` imports (which must stay first), one
  statement ``exec(PRELUDE, {})``: the prelude runs in a frame of its own that is gone
  when it returns. It removes the compiled file's folder from ``sys.path`` before any
  import (so mpsprof's own imports never see the user's folders), imports the boot and
  lets it make ``sys.argv``, ``sys.path``, ``__file__`` and ``__loader__`` what python
  gives the script (:func:`mpsprofiler.probe.boot.prepare_main`).
* The rest of the body inside ``try: ... except SystemExit: END; raise except
  BaseException: END(failed); raise else: END``: ``END`` (``__builtins__.exec`` of a
  line that calls :func:`mpsprofiler.probe.boot.end_main`: no name of ours in the
  script's globals or in builtins) closes the probe or reports an uncaught exception the
  way python does (our frames trimmed, the crash recorded).

The script's own compile-time warnings (``SyntaxWarning``, ``DeprecationWarning``) are
said by the prelude, through the child's warning filters, as python says them compiling
the script. A script that does not compile, a module (``-m``), a directory or zip file
take the start program instead (:func:`start_program`), which keeps one frame below the
script.
"""

from __future__ import annotations

import ast
import builtins
import importlib.util
import os
import shutil
import tempfile
import warnings
import zipfile
from typing import TypeVar

_PRELUDE = """
import sys
startup = set(sys.modules)
if WARNINGS:  # what python prints compiling the script, before its first line, as it would
    import builtins
    import warnings
    for category, message, filename, lineno in WARNINGS:
        warnings.warn_explicit(message, getattr(builtins, category), filename, lineno)
if not KEEP:  # python has read the whole file: nothing is left behind, even if mpsprof dies
    try:
        import os
        os.remove(COMPILED)
        os.rmdir(os.path.dirname(COMPILED))
    except OSError:
        pass
safe = getattr(sys.flags, "safe_path", False)
if not safe and sys.path:
    sys.path_importer_cache.pop(sys.path.pop(0), None)
added = HOME not in sys.path
if added:
    sys.path.append(HOME)
try:
    from mpsprofiler.probe import boot
    if added:
        sys.path.remove(HOME)
        added = False
    boot.prepare_main([SCRIPT, *sys.argv[1:]], compiled=COMPILED, startup=startup)
except Exception as exc:  # the script runs, as python would run it, without the profiler
    sys.stderr.write(f"mpsprof: profiler disabled ({type(exc).__name__}: {exc})\\n")
    if added:
        sys.path.remove(HOME)
    import os
    if sys.argv and sys.argv[0] == COMPILED:
        sys.argv[0] = SCRIPT
    from importlib.machinery import SourceFileLoader
    main = sys.modules["__main__"]
    main.__file__ = SCRIPT if os.path.isabs(SCRIPT) else os.path.join(os.getcwd(), SCRIPT)
    main.__loader__ = SourceFileLoader("__main__", main.__file__)
    path0 = os.path.dirname(os.path.realpath(SCRIPT))
    if not safe and sys.path[:1] != [path0]:
        sys.path.insert(0, path0)
"""


def start_program() -> str:
    """The child's start program, run as ``python FILE TARGET ARGS...``: it imports the
    boot with neither the user's working directory nor the script's on ``sys.path`` (a
    ``token.py`` there broke ``import traceback`` before the script's first line, a
    ``json.py`` there became the script's json too), then runs the script from its own
    module frame, the only frame of mpsprof's below the script's (see
    :mod:`mpsprofiler.probe.importlib_bootstrap_start`, whose file name also makes the
    warnings machinery skip that frame). Used where :func:`compile_script` is not.
    """
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.path.join(package, "probe", "importlib_bootstrap_start.py")


def _optimize(env: dict[str, str]) -> int:
    """The child's ``-O`` level: it runs with no flags, so ``PYTHONOPTIMIZE`` alone says
    (an integer, or 1 for any other non-empty value, as Python/initconfig.c reads it)."""
    raw = env.get("PYTHONOPTIMIZE", "")
    if not raw:
        return 0
    try:
        return max(0, int(raw))
    except ValueError:
        return 1


def _call(name: str, *args: ast.expr) -> ast.Expr:
    """``__builtins__.NAME(ARGS)``: in ``__main__`` ``__builtins__`` is the builtins module,
    so a script's own global ``exec`` never stands in for the builtin."""
    func = ast.Attribute(ast.Name("__builtins__", ast.Load()), name, ast.Load())
    return ast.Expr(ast.Call(func=func, args=list(args), keywords=[]))


def _end(failed: bool) -> ast.Expr:
    """The body's end: the boot closes the probe or reports the uncaught exception."""
    source = ("import sys\nend = getattr(sys.modules.get('mpsprofiler.probe.boot'), 'end_main', None)\n"
              f"end is None or end({failed})\n")
    return _call("exec", ast.Constant(source), ast.Dict(keys=[], values=[]))


_Node = TypeVar("_Node", bound=ast.AST)


def _placed(node: _Node, line: int) -> _Node:
    """Our nodes take the line of the script's first wrapped statement."""
    for child in ast.walk(node):
        if hasattr(child, "lineno") or isinstance(child, (ast.stmt, ast.expr, ast.excepthandler)):
            child.lineno, child.col_offset = line, 0  # type: ignore[attr-defined]
            child.end_lineno, child.end_col_offset = line, 0  # type: ignore[attr-defined]
    return node


def _wrap(tree: ast.Module, prelude: str) -> ast.Module:
    body = list(tree.body)
    keep = 0
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        keep = 1  # the docstring: __doc__ comes from the first statement
    while keep < len(body) and isinstance(body[keep], ast.ImportFrom) and getattr(body[keep], "module", "") == "__future__":
        keep += 1
    head, rest = body[:keep], body[keep:]
    line = rest[0].lineno if rest else (head[-1].end_lineno or 1) if head else 1
    if not rest:
        rest = [_placed(ast.Pass(), line)]
    start = _placed(_call("exec", ast.Constant(prelude), ast.Dict(keys=[], values=[])), line)
    handlers = [
        _placed(ast.ExceptHandler(type=ast.Name("SystemExit", ast.Load()), name=None,
                                  body=[_end(False), ast.Raise()]), line),
        _placed(ast.ExceptHandler(type=ast.Name("BaseException", ast.Load()), name=None,
                                  body=[_end(True), ast.Raise()]), line),
    ]
    wrapped = ast.Try(body=rest, handlers=handlers, orelse=[_placed(_end(False), line)], finalbody=[])
    wrapped.lineno, wrapped.col_offset = line, 0
    wrapped.end_lineno, wrapped.end_col_offset = rest[-1].end_lineno, 0
    tree.body = [*head, start, wrapped]
    return tree


def compile_script(script: str, cwd: str | None, env: dict[str, str], keep: bool = False) -> str | None:
    """Compile ``script`` (as the user spelled it, relative to ``cwd``) into a private
    folder's ``.pyc`` whose code starts the probe itself; None where it cannot (the
    start program then runs the script, and python reports what does not compile).
    Unless ``keep`` (torchrun: every rank, and every restart, runs the file), the child
    removes the file and its folder as it starts."""
    path = os.path.join(cwd or os.getcwd(), script)
    folder = None
    try:
        if not os.path.isfile(path) or zipfile.is_zipfile(path):
            return None  # a zip file runs through its __main__ (the start program's case)
        with open(path, "rb") as fh:
            source = fh.read()
        home = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        folder = tempfile.mkdtemp(prefix="mpsprof-start-")
        # named as the script (python knows a compiled file by its magic number): torchrun's
        # messages and ps name the script
        compiled = os.path.join(folder, os.path.basename(path))
        prelude = "\n".join([f"HOME = {home!r}", f"SCRIPT = {script!r}", f"COMPILED = {compiled!r}",
                             f"KEEP = {keep!r}", _PRELUDE])
        # the file name python gives the code: the child's working directory (a physical
        # path, as getcwd() gives it) joined to a relative script, not normalized
        where = os.path.realpath(cwd) if cwd else os.getcwd()
        filename = script if os.path.isabs(script) else os.path.join(where, script)
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            tree = ast.parse(source, filename)
            code = compile(tree, filename, "exec", dont_inherit=True, optimize=_optimize(env))
        # the script's compile-time warnings (an invalid escape sequence, `is` with a
        # literal): python compiles it in the child and prints them there, through the
        # child's warning filters; the compiled file's prelude says them the same way
        # (warnings.warn_explicit with no module: named from the file, as the compiler's
        # PyErr_WarnExplicitObject call is)
        found = [(w.category.__name__, str(w.message), w.filename, w.lineno) for w in said if w.filename == filename]
        if any(not isinstance(getattr(builtins, c, None), type) for c, *_ in found):
            shutil.rmtree(folder, ignore_errors=True)
            return None  # a category that is no builtin: the start program runs it
        prelude = f"WARNINGS = {found!r}\n" + prelude
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # said once already, above
            code = compile(_wrap(tree, prelude), filename, "exec", dont_inherit=True, optimize=_optimize(env))
        data = importlib._bootstrap_external._code_to_hash_pyc(  # type: ignore[attr-defined]
            code, importlib.util.source_hash(source), checked=False)
        with open(compiled, "wb") as out:
            out.write(data)
        return compiled
    except Exception:  # noqa: BLE001 - whatever went wrong, the start program runs the script
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
        return None


def remove_compiled(compiled: str | None) -> None:
    """Remove the compiled file's private folder (after the run: torchrun may restart
    ranks); None, for the caller to forget the path."""
    if compiled:
        shutil.rmtree(os.path.dirname(compiled), ignore_errors=True)
    return None


