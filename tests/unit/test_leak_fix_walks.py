"""A leak's fix reads the script's syntax tree once per question, not once per asker.

Why: ``keep_fix`` asked ``number_safe`` twice and ``deque_safe`` once, and each built the
tree's parents and found the holder's uses anew, unparsing every name of the file; and
``read_tree`` parsed the file again for each site and each fix. A report on a
33,000-line script with one leak took 6.5 s (9.4 s under cProfile, 4.6 s now with the same
text). The parents, the uses and ``number_safe`` are kept per tree, ``read_tree`` keeps the
tree while the file's text is the same, and a name is unparsed only where its text can
be the holder's.
"""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mpsprofiler.diagnosis.analyzers import leak_fix, source_edit

SCRIPT = '''import torch
model = torch.nn.Linear(4, 1)


def helper(x):
    y = x + 1
    return y * 2


def train(steps):
    losses = []
    for step in range(steps):
        loss = helper(model(torch.randn(8, 4))).pow(2).mean()
        loss.backward()
        losses.append(loss)
        if step % 10 == 0:
            print(sum(losses) / len(losses), losses[-1])
    return losses


train(100)
'''


@pytest.fixture
def site(tmp_path: Path) -> Any:
    script = tmp_path / "leaky.py"
    script.write_text(SCRIPT)
    return SimpleNamespace(holder="losses", holder_file=str(script), holder_line=15, grad=True, scalar=True)


def test_the_fix(site: Any) -> None:
    fix = leak_fix.keep_fix(site)
    assert fix["leak_site_number"] == "item" and fix["leak_site_item_code"] == "losses.append(loss.item())"
    assert fix["leak_site_fix_code"].splitlines()[0] == "losses.append(loss.detach())  # no autograd graph kept"
    assert "losses = collections.deque(maxlen=100)" in fix["leak_site_fix_code"]


def test_parsed_once_and_asked_once(site: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"parse": 0, "walk": 0, "unparse": 0}
    parse, walk, unparse = ast.parse, ast.walk, ast.unparse

    def counting_parse(*args: Any, **kwargs: Any) -> Any:
        calls["parse"] += 1
        return parse(*args, **kwargs)

    def counting_walk(node: ast.AST) -> Any:
        calls["walk"] += isinstance(node, ast.Module)
        return walk(node)

    def counting_unparse(node: ast.AST) -> str:
        calls["unparse"] += 1
        return unparse(node)

    monkeypatch.setattr(ast, "parse", counting_parse)
    monkeypatch.setattr(ast, "walk", counting_walk)
    monkeypatch.setattr(ast, "unparse", counting_unparse)
    first = leak_fix.keep_fix(site)
    assert calls["parse"] == 1
    assert calls["walk"] <= 5, calls  # the statement, parents, uses, number_safe's elements, the creation
    names = sum(isinstance(n, (ast.Name, ast.Attribute, ast.Subscript)) for n in walk(parse(SCRIPT)))
    assert calls["unparse"] < names // 2, (calls, names)  # not every name of the file
    assert leak_fix.keep_fix(site) == first and source_edit.read_tree(site.holder_file) is not None
    assert calls["parse"] == 1, calls  # the same text: the same tree


def test_an_edited_file_is_parsed_again(site: Any) -> None:
    first = source_edit.read_tree(site.holder_file)
    assert first is not None and source_edit.read_tree(site.holder_file) is first
    Path(site.holder_file).write_text(SCRIPT.replace("losses.append(loss)", "losses.append(loss.detach())"))
    second = source_edit.read_tree(site.holder_file)
    assert second is not None and second is not first and "loss.detach()" in second[0]
