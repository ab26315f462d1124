"""The leak readers' questions about a script's syntax tree: one walk of the tree per file,
not one per question.

Why: ``_adding_lines`` (the lines that add to a leaking container), ``may_keep`` (what
each such line adds), ``_assignment_line`` and ``_target_text`` each walked the whole tree
at every call, and they are asked at every leak check for each leaking site. A
33,000-line script that kept its loss in a list spent 21.6 s of 26 s (under cProfile) in
them over 16 checks. ``leak_owner.statements`` walks a tree once; the readers filter what
it kept, in the walk's order, so they answer as before.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path
from typing import Any

import pytest

from mpsprofiler.probe import leak_owner, ops_leaks

SOURCE = textwrap.dedent('''\
    import torch
    class Trainer:
        def __init__(self):
            self.stats = {"loss": 0}
            self.outs = []
        def step(self, loss):
            self.stats["loss"] += loss
            self.outs.append(loss.item())
            self.outs.append(loss)
    def train(model, loader):
        losses = []
        total = 0
        history = {}
        for x in loader:
            loss = model(x).sum()
            losses.append(loss)
            losses.append(loss.detach())
            total = total + loss
            history.setdefault("loss", []).append(loss)
            history["loss"].append(loss)
        return losses, total
    ''')


@pytest.fixture
def script(tmp_path: Path) -> str:
    path = tmp_path / "leaky_train.py"
    path.write_text(SOURCE, encoding="utf-8")
    return str(path)


def _ask(file: str) -> list[Any]:
    code = compile(SOURCE, file, "exec")
    train = next(c for c in code.co_consts if getattr(c, "co_name", "") == "train")
    return [
        ops_leaks._adding_lines(file, "losses"),
        ops_leaks._adding_lines(file, "self.outs"),
        ops_leaks._adding_lines(file, "history['loss']"),
        ops_leaks._adding_line(file, "losses", [train], True),
        ops_leaks._adding_line(file, "self.outs", [], True),
        ops_leaks._assignment_line(file, "total", train),
        ops_leaks._target_text(file, 7, "trainer.stats['loss']"),
        leak_owner.may_keep(leak_owner.parsed(file), 17, "losses", True),  # type: ignore[arg-type]
        leak_owner.may_keep(leak_owner.parsed(file), 16, "losses", True),  # type: ignore[arg-type]
    ]


def test_the_answers(script: str) -> None:
    assert _ask(script) == [[16, 17], [8, 9], [19, 20], 16, 9, 18, 'self.stats["loss"]', False, True]


def test_one_walk_of_a_file_for_many_questions(script: str, monkeypatch: pytest.MonkeyPatch) -> None:
    walk = ast.walk
    roots: list[ast.AST] = []

    def counting(node: ast.AST) -> Any:
        if isinstance(node, ast.Module):
            roots.append(node)
        return walk(node)

    leak_owner.parsed(script)  # parsed once (cached before this change too)
    monkeypatch.setattr(ast, "walk", counting)
    first = _ask(script)
    for _ in range(5):  # the checks that follow
        assert _ask(script) == first
    assert len(roots) <= 1, f"{len(roots)} walks of the whole tree for 6 rounds of questions"
