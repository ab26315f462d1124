"""Where a Hugging Face Trainer's user changes the loader: the script's ``TrainingArguments``.

A Trainer user never writes ``DataLoader(...)``: ``Trainer.get_train_dataloader`` builds it
from ``TrainingArguments`` (``dataloader_num_workers``, ``dataloader_persistent_workers``,
...) and accelerate rebuilds it. The probe records the script's line that started it
(``trainer.train()``, the first frame outside torch and the frameworks), where there is no
``DataLoader`` call to rewrite; so the fix rewrites the script's ``TrainingArguments(...)``
call instead, the other arguments kept as written. Lightning and accelerate users build
the ``DataLoader`` themselves: the probe names that line and it is rewritten as usual.
"""

from __future__ import annotations

import ast
from typing import Any

from ...session.session import Session
from .source_edit import call_name, has_main_guard, read_tree, rewrite_call, short_path

ARGUMENT_CALLS = ("TrainingArguments", "Seq2SeqTrainingArguments")


def _arguments_line(path: str) -> tuple[str, int, bool] | None:
    """(the call's name, its line, the script has a main guard) of the first
    ``TrainingArguments(...)`` in ``path``."""
    read = read_tree(path)
    if read is None:
        return None
    _, tree = read
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and call_name(n) in ARGUMENT_CALLS]
    if not calls:
        return None
    first = min(calls, key=lambda n: n.lineno)
    return call_name(first), first.lineno, has_main_guard(tree)


def trainer_place(session: Session, file: str | None, line: int | None, workers: int) -> dict[str, Any] | None:
    """``loader_name``, ``loader_place``, ``loader_where``, ``loader_code`` for a Trainer's
    loader; None when the run was not a Trainer's."""
    if session.model.get("framework") != "transformers Trainer":
        return None
    cwd = session.run.get("cwd")
    started = f"{short_path(file, cwd)}:{line}" if file and line else None
    out: dict[str, Any] = {
        "loader_name": "the Trainer's training DataLoader" + (f" (started at {started})" if started else ""),
        "loader_place": started,
    }
    changes = {"dataloader_num_workers": str(workers)}
    if workers > 0:
        changes["dataloader_persistent_workers"] = "True"
    found = _arguments_line(file) if file else None
    rewrite = rewrite_call(file, found[1], (found[0],), changes) if file and found else None
    if rewrite is not None:
        where = f"{short_path(rewrite.path, cwd)}:{rewrite.line}"
        out["loader_place"] = where
        out["loader_where"] = f"The Trainer builds it from its `TrainingArguments`: change them ({where}) to"
        code = rewrite.after
        if workers > 0 and found is not None and not found[2]:
            code += ("\n\n# with workers on macOS each worker re-imports the script: guard the start\n"
                     "if __name__ == \"__main__\":\n    main()")
        out["loader_code"] = code
        return out
    out["loader_where"] = "The Trainer builds it from its `TrainingArguments`: set"
    lines = ["args = TrainingArguments(", "    ...,"] + [f"    {k}={v}," for k, v in changes.items()] + [")"]
    out["loader_code"] = "\n".join(lines)
    return out
