"""``leak_owner.source_segment``: a node's source text from the file's lines, as
``ast.get_source_segment`` gives it, without re-splitting the whole file at each call.

Why: at a sampled step the op recorder reads every assignment of the training function
(``ops_record._device_names``, which names the tensors a loop put on its device); with
``ast.get_source_segment`` each read split the whole file again, so a 3,000-line function
took 20 s at its first sampled step (145 ms now).
"""

from __future__ import annotations

import ast
import linecache
import textwrap
from pathlib import Path

import pytest

from mpsprofiler.probe import ops_record
from mpsprofiler.probe.leak_owner import source_segment

SOURCE = textwrap.dedent('''\
    import torch
    device = "cpu"
    def train(loader, model):
        note = "µs — ünïcode before the node"; x = torch.zeros(2).to(device)
        y = (torch.ones(3)
             .to(device))
        z = torch.rand(4, device=device)
        label = "plain"
        for batch in loader:
            w = batch.to(device, non_blocking=True)
        return x, y, z, w, note, label
    ''')


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "train_script.py"
    path.write_text(SOURCE, encoding="utf-8")
    linecache.checkcache(str(path))
    return path


def test_every_node_reads_as_get_source_segment_reads_it(script: Path) -> None:
    lines = linecache.getlines(str(script))
    tree = ast.parse(SOURCE)
    nodes = [n for n in ast.walk(tree) if hasattr(n, "end_col_offset")]
    assert len(nodes) > 50
    for node in nodes:
        assert source_segment(lines, node) == ast.get_source_segment(SOURCE, node)


def test_device_names_of_a_function_never_split_the_file_per_statement(script: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    namespace: dict[str, object] = {}
    exec(compile(SOURCE, str(script), "exec"), namespace)
    code = namespace["train"].__code__  # type: ignore[attr-defined]

    def split_again(*_: object, **__: object) -> None:
        raise AssertionError("ast.get_source_segment re-splits the whole file at each call")

    monkeypatch.setattr(ast, "get_source_segment", split_again)
    ops_record._DEVICE_NAMES.pop(code, None)
    assert ops_record._device_names(code) == frozenset({"x", "y", "z", "w"})
