"""Where a Hugging Face Trainer's user changes the loader: the script's ``TrainingArguments``.

A Trainer user never writes ``DataLoader(...)``: ``Trainer.get_train_dataloader`` builds it
from ``TrainingArguments`` (``dataloader_num_workers``, ``dataloader_persistent_workers``,
...) and accelerate rebuilds it. The probe records the script's line that started it
(``trainer.train()``, the first frame outside torch and the frameworks), where there is no
``DataLoader`` call to rewrite; so the fix rewrites the script's ``TrainingArguments(...)``
call instead, the other arguments kept as written. Lightning and accelerate users build
the ``DataLoader`` themselves: the probe names that line and it is rewritten as usual.

With workers, each one started by spawn (macOS's default) re-imports the script, so its
top-level code must run under ``if __name__ == "__main__":``. :func:`guard_note` says
where that code starts in the script that ran, as written (``main()``, ``train()``,
``run(parse_args())`` or the training itself at module level): the fix never invents a
``main()`` the script does not have.
"""

from __future__ import annotations

import ast
import os
import shlex
from dataclasses import dataclass
from typing import Any

from ...session.session import Session
from .source_edit import call_name, edit_record, has_main_guard, read_tree, rewrite_call, short_path

ARGUMENT_CALLS = ("TrainingArguments", "Seq2SeqTrainingArguments",
                  # TRL's trainers (SFTTrainer, DPOTrainer ... subclasses of Trainer) take these,
                  # each a subclass of TrainingArguments (trl/trainer/*_config.py)
                  "SFTConfig", "DPOConfig", "GRPOConfig", "KTOConfig", "ORPOConfig", "CPOConfig", "BCOConfig",
                  "RewardConfig", "PRMConfig", "GKDConfig", "OnlineDPOConfig", "RLOOConfig", "PPOConfig",
                  "XPOConfig", "NashMDConfig")
"""The calls that make a Trainer's arguments, by name: the script's one is rewritten."""
TRAINER_LOADER_ARGUMENTS = {"num_workers": "dataloader_num_workers", "persistent_workers": "dataloader_persistent_workers",
                            "pin_memory": "dataloader_pin_memory", "prefetch_factor": "dataloader_prefetch_factor"}
"""A DataLoader argument and the ``TrainingArguments`` field a Trainer builds its loader from
(``Trainer.get_train_dataloader``)."""
GUARD_WHY = "# with workers on macOS each worker re-imports the script (spawn):"


def _scope(tree: ast.Module, line: int) -> ast.AST:
    """The innermost function (or the module) whose lines hold ``line``."""
    best: ast.AST = tree
    for node in ast.walk(tree):
        if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                and node.lineno <= line <= (node.end_lineno or node.lineno)
                and (best is tree or node.lineno >= getattr(best, "lineno", 0))):
            best = node
    return best


def arguments_line(path: str, line: int | None = None) -> tuple[str, int] | None:
    """(the call's name, its line) of the ``TrainingArguments(...)`` in ``path`` that the
    Trainer started at ``line`` uses: the only one in the file, else the last one before
    ``line`` in the same function; None when that cannot be told (no guess)."""
    read = read_tree(path)
    if read is None:
        return None
    _, tree = read
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and call_name(n) in ARGUMENT_CALLS]
    if len(calls) > 1:
        if line is None:
            return None
        scope = _scope(tree, line)
        calls = [c for c in calls if c.lineno <= line and _scope(tree, c.lineno) is scope]
        calls = [max(calls, key=lambda n: n.lineno)] if calls else []
    if not calls:
        return None
    return call_name(calls[0]), calls[0].lineno


def _stays(stmt: ast.stmt) -> bool:
    """What a re-importing worker needs and may run at the top level: imports, definitions,
    docstrings, call-free constants (and a ``try:`` of those); as ``mpsprof patch`` does."""
    if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                         ast.Pass)):
        return True
    if isinstance(stmt, ast.Expr):
        return isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        return stmt.value is not None and not any(isinstance(n, ast.Call) for n in ast.walk(stmt.value))
    if isinstance(stmt, ast.Try):
        blocks = [stmt.body, *(h.body for h in stmt.handlers), stmt.orelse, stmt.finalbody]
        return all(_stays(s) for block in blocks for s in block)
    return False


def _top_level_code(tree: ast.Module) -> list[ast.stmt]:
    """The script's top-level statements that a re-importing worker must not run (none
    where the script has the guard already)."""
    if has_main_guard(tree):
        return []
    imports = [i for i, s in enumerate(tree.body) if isinstance(s, (ast.Import, ast.ImportFrom))]
    last_import = imports[-1] if imports else -1
    # a bare call above an import is set-up it may need (`sys.path.insert(...)`): it stays
    return [s for i, s in enumerate(tree.body) if not _stays(s)
            and not (i < last_import and isinstance(s, ast.Expr) and isinstance(s.value, ast.Call))]


def guard_span(source: str) -> tuple[int, int] | None:
    """(first line, last line) of the top-level code that goes under ``if __name__ ==
    "__main__":``, the span :func:`guard_note` names; ``mpsprof patch`` moves this span, so
    the finding's words and the patch agree. None: guarded already, no such code, or the
    text does not parse."""
    try:
        code = _top_level_code(ast.parse(source))
    except (SyntaxError, ValueError):
        return None
    if not code:
        return None
    return code[0].lineno, code[-1].end_lineno or code[-1].lineno


def _script(session: Session, file: str | None) -> str | None:
    """The script the run ran (its re-import is what the guard stops), else ``file``."""
    target = session.run.get("target")
    if target and not session.run.get("module"):
        path = str(target)
        return path if os.path.isabs(path) else os.path.join(str(session.run.get("cwd") or ""), path)
    return file


def guard_note(session: Session, file: str | None) -> str:
    """Lines for the end of a loader fix with workers: the script's top-level code, from
    the line where it starts (as written), under ``if __name__ == "__main__":``; "" when
    the script has the guard, has no top-level code, or cannot be read."""
    script = _script(session, file)
    read = read_tree(script) if script else None
    if script is None or read is None:
        return ""
    source, tree = read
    code = _top_level_code(tree)
    if not code:
        return ""
    first, last = code[0], code[-1]
    where = f"{short_path(script, session.run.get('cwd'))}:{first.lineno}"
    end = last.end_lineno or last.lineno
    lines = (ast.get_source_segment(source, first) or "").splitlines()
    if len(code) == 1 and len(lines) == 1:  # `main()`, `train()`, `run(parse_args())`
        return (f"\n\n{GUARD_WHY} guard\n# its start, `{lines[0]}` ({where})\n"
                f'if __name__ == "__main__":\n    {lines[0]}')
    # its first statement as written (a compound one's first line), then the rest elided
    shown = [lines[0], "    ..."] if lines and lines[0].rstrip().endswith(":") else lines if len(lines) <= 3 else []
    if len(code) > 1 or shown != lines:
        shown.append("...")
    body = "\n".join(f"    {text}" for text in shown)
    return (f"\n\n{GUARD_WHY} its top-level\n# code, {where} to line {end}, goes under the guard\n"
            f"# (imports, functions, classes and constants stay above it)\n"
            f'if __name__ == "__main__":\n{body}')


@dataclass
class ArgumentsFix:
    """The script's ``TrainingArguments(...)`` call with some settings changed, or (``path``
    None) a snippet of one where that call was not found."""

    code: str
    path: str | None = None
    line: int | None = None
    place: str | None = None
    """``path:line`` as shown (relative to the run's directory when inside it)."""
    edit: dict[str, Any] | None = None
    """The rewrite as data (:func:`~.source_edit.edit_record`), for fixes of one call shown together."""


def arguments_fix(file: str | None, line: int | None, changes: dict[str, str], cwd: object) -> ArgumentsFix:
    """``changes`` (field -> source text of its value) made to the ``TrainingArguments``
    call the Trainer started at ``file:line`` uses (:func:`arguments_line`), its other
    arguments as written; a snippet with only those fields where it cannot be found."""
    found = arguments_line(file, line) if file else None
    rewrite = rewrite_call(file, found[1], (found[0],), changes) if file and found else None
    if rewrite is not None and file and found:
        return ArgumentsFix(rewrite.after, rewrite.path, rewrite.line, rewrite.place(cwd),
                            edit_record(file, found[1], (found[0],), changes, rewrite))
    lines = [f"args = {ARGUMENT_CALLS[0]}(", "    ...,"] + [f"    {k}={v}," for k, v in changes.items()] + [")"]
    return ArgumentsFix("\n".join(lines))


def trainer_place(session: Session, file: str | None, line: int | None, workers: int,
                  side: bool = False, persistent: bool = True) -> dict[str, Any] | None:
    """``loader_name``, ``loader_place``, ``loader_where``, ``loader_code`` for a Trainer's
    loader; None when the run was not a Trainer's. ``side``: its evaluation loader (read in
    a few steps only); the same ``TrainingArguments`` build both. ``persistent``: whether
    the fix sets ``dataloader_persistent_workers=True`` (with workers): not for a loader
    read in one pass (one epoch, or ``max_steps`` within the first), whose workers start
    once anyway (torch's ``DataLoader.__iter__`` keeps them only for a next pass)."""
    if session.framework != "transformers Trainer":
        return None
    cwd = session.run.get("cwd")
    started = f"{short_path(file, cwd)}:{line}" if file and line else None
    name = "trainer_eval" if side else "trainer"
    out: dict[str, Any] = {
        "loader_name": f"{name}_started" if started else name,  # codes rules/dataloader-stall.yaml words
        "loader_name_place": started,
        "loader_place": started,
    }
    changes = {TRAINER_LOADER_ARGUMENTS["num_workers"]: str(workers)}
    if workers > 0 and persistent:
        changes[TRAINER_LOADER_ARGUMENTS["persistent_workers"]] = "True"
    fix = arguments_fix(file, line, changes, cwd)
    if fix.path is not None:
        out["loader_place"] = fix.place
        out["loader_where"] = "trainer_rewrite"
        out["loader_code"] = fix.code + (guard_note(session, file) if workers > 0 else "")
        out["loader_code_edit"] = fix.edit
        return out
    cli = command_line_fix(session, file, changes)
    if cli is not None:  # HfArgumentParser: the arguments come from the command line
        out["loader_where"] = "trainer_cli"
        out["loader_code"] = cli
        return out
    out["loader_where"] = "trainer"
    out["loader_code"] = fix.code
    return out


def command_line_fix(session: Session, file: str | None, changes: dict[str, str]) -> str | None:
    """A script that reads its ``TrainingArguments`` from the command line
    (``HfArgumentParser``, as the transformers examples' ``run_*.py`` do) has no call to
    change: the settings go on its command line (``--dataloader_num_workers 4``), the
    recorded one with them set, as comment lines of the fix's code. None elsewhere."""
    read = read_tree(file) if file else None
    if read is None or "HfArgumentParser" not in read[0]:
        return None
    argv = [str(a) for a in session.run.get("argv") or []]
    if not argv:
        return None
    args = argv[1:]
    typed = {name: value.lower() if value in ("True", "False") else value for name, value in changes.items()}
    for name, text in typed.items():
        flag = f"--{name}"
        at = [i for i, a in enumerate(args) if a == flag or a.startswith(flag + "=")]
        if not at:
            args += [flag, text]
            continue
        i = at[-1]
        if args[i] == flag and i + 1 < len(args):
            args[i + 1] = text
        else:
            args[i] = f"{flag}={text}"
    flags = " ".join(f"--{name} {text}" for name, text in typed.items())
    script = short_path(argv[0], session.run.get("cwd"))
    return (f"# {flags}\n# added to its command line (HfArgumentParser reads TrainingArguments there):\n"
            + _wrapped(["python", script, *args]))


def _wrapped(words: list[str], width: int = 76) -> str:
    """A shell command as comment lines of at most ``width`` characters, continued with ``\\``
    (a code block is not wrapped: the TUI cuts a long line at its edge)."""
    lines: list[str] = []
    line = "#  "
    for word in (shlex.quote(w) for w in words):
        if len(line) + 1 + len(word) > width and line != "#  ":
            lines.append(line + " \\")
            line = "#     "
        line += " " + word
    return "\n".join([*lines, line])
