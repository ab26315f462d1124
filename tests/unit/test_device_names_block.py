"""``ops_record._device_names`` reads a function's own source, not its whole file.

Why: at the first sampled step of a CPU run the op recorder names the tensors each user
frame put on its device (``seed_device_locals``: read after ``optimizer.step()`` they would
wait for a Mac's GPU). It parsed the whole file of every user frame: ~2.5 ms of the first
sample's ~10 ms for the 200-line ``benchmarks/workload.py``, growing with the file, not the
function. A ``def`` is now parsed alone (``_function_block``); a module, a lambda or a
block that does not parse alone reads the file's tree as before. What must not change:
the names found, for every function of every training script here (the corpus of real
projects, the test scripts, the benchmarks).
"""

from __future__ import annotations

import linecache
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mpsprofiler.probe import ops_record
from mpsprofiler.probe.ops_leaks import code_range

ROOT = Path(__file__).resolve().parents[2]
SOURCE = textwrap.dedent('''\
    import functools
    import torch
    device = "cpu"
    x_top = torch.zeros(1).to(device)

    class Trainer:
        @functools.lru_cache(maxsize=None)
        def step(self, batch):
            x = batch.to(device)
            y = torch.rand(3, device=device)
            def inner(b):
                w = b.cuda()
                return w
            return x, y, inner

        def ends_assigning(self, b):
            q = b.to(device)

    def loop(batches):
        for b in batches:
            z = b.to(device, non_blocking=True)
        return z

    def noted(batch):
        v = batch.to(device)
        return v, """a string
    whose line starts at column 0, in the function's last statement"""
    ''')


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _file_wide(code: Any, monkeypatch: pytest.MonkeyPatch) -> frozenset[str]:
    """The names as read from the whole file's tree (the reading before this change)."""
    with monkeypatch.context() as m:
        m.setattr(ops_record, "_function_block", lambda *_: None)
        ops_record._DEVICE_NAMES.pop(code, None)
        found = ops_record._device_names(code)
    ops_record._DEVICE_NAMES.pop(code, None)
    return found


@pytest.fixture
def script(tmp_path: Path) -> dict[str, types.CodeType]:
    path = tmp_path / "train_block.py"
    path.write_text(SOURCE, encoding="utf-8")
    linecache.checkcache(str(path))
    top = compile(SOURCE, str(path), "exec")
    return {c.co_name: c for c in _codes(top)}


def test_a_function_is_read_without_its_file(script: dict[str, types.CodeType],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    def whole_file(_: str) -> None:
        raise AssertionError("the whole file was parsed for a function")

    monkeypatch.setattr(ops_record, "parsed", whole_file)
    for name in ("step", "inner", "loop", "ends_assigning"):
        ops_record._DEVICE_NAMES.pop(script[name], None)
    # a decorated method (parsed under ``if 1:``), a nested function, a plain function
    assert ops_record._device_names(script["step"]) == frozenset({"x", "y", "w"})
    assert ops_record._device_names(script["inner"]) == frozenset({"w"})
    assert ops_record._device_names(script["loop"]) == frozenset({"z"})
    assert ops_record._device_names(script["ends_assigning"]) == frozenset({"q"})  # its last line


def test_what_does_not_parse_alone_reads_the_file(script: dict[str, types.CodeType],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    lines = linecache.getlines(script["noted"].co_filename)
    for name in ("noted", "<module>"):
        code = script[name]
        # a column-0 line inside a string ends the block early (it cannot parse); a module is no def
        assert ops_record._function_block(code, lines, code_range(code, len(lines))[1]) is None
    ops_record._DEVICE_NAMES.pop(script["noted"], None)
    assert ops_record._device_names(script["noted"]) == frozenset({"v"})
    assert ops_record._device_names(script["<module>"]) == _file_wide(script["<module>"], monkeypatch)


def test_every_function_of_the_training_scripts_names_what_the_file_named(monkeypatch: pytest.MonkeyPatch) -> None:
    files = sorted([*ROOT.glob("tests/corpus/**/*.py"), *ROOT.glob("tests/scripts*/**/*.py"),
                    *ROOT.glob("benchmarks/*.py")])  # fmt: skip
    alone = named = 0
    for file in files:
        source = file.read_text(encoding="utf-8")
        try:
            top = compile(source, str(file), "exec")
        except SyntaxError:
            continue
        lines = linecache.getlines(str(file))
        for code in _codes(top):
            before = _file_wide(code, monkeypatch)
            ops_record._DEVICE_NAMES.pop(code, None)
            assert ops_record._device_names(code) == before, (file, code.co_name, code.co_firstlineno)
            last = code_range(code, len(lines))[1]
            alone += ops_record._function_block(code, lines, last) is not None
            named += bool(before) and code.co_name != "<module>"
    # the comparison covers functions that were parsed alone and name tensors
    assert alone > 500 and named > 30, (alone, named)


def test_only_frames_holding_a_tensor_have_their_source_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """``seed_device_locals`` reads a user frame's source only where the frame holds a tensor
    without gradients (one it may have put on its device): a script's module frame under a
    ``main()`` holds none, and its file is no longer parsed for it."""
    import sys

    import torch

    from mpsprofiler.probe.modules import ModuleTracker
    from mpsprofiler.probe.ops_leaks import LeakTracker
    from mpsprofiler.probe.ops_sites import FrameFinder, TensorPatches

    finder = FrameFinder()
    record = ops_record.StepRecord(ModuleTracker(lambda _: None), finder, TensorPatches(lambda *_: None), {}, {},
                                   LeakTracker(lambda: finder), "cpu")  # fmt: skip
    read: list[str] = []
    names = ops_record._device_names

    def reading(code: types.CodeType) -> frozenset[str]:
        read.append(code.co_name)
        return names(code)

    monkeypatch.setattr(ops_record, "_device_names", reading)
    device = "cpu"

    def loop_step() -> torch.Tensor:
        x = torch.zeros(2).to(device)
        record.seed_device_locals(sys._getframe())
        return x

    kept = loop_step()  # this test's own frame holds no tensor yet: its source is not read
    assert read == ["loop_step"]
    assert record.model_derived(kept)  # the tensor the loop put on its device is marked, as before
