"""The float64 line rewritten to float32 (float64_fix): ``.to(device)`` alone keeps float64,
and non-ASCII text before the expression does not shift the edits (ast's offsets are bytes)."""

from __future__ import annotations

import ast

import pytest

from mpsprofiler.diagnosis.analyzers.float64_fix import _float32, _other_makers


def one(src: str) -> str | None:
    return _float32(src, ast.parse(src).body[-1])


@pytest.mark.parametrize(("src", "want"), [
    ("x = torch.from_numpy(a).to(device)", "x = torch.from_numpy(a).float().to(device)"),
    ("x = torch.from_numpy(a).to(device, non_blocking=True)",
     "x = torch.from_numpy(a).float().to(device, non_blocking=True)"),
    ("x = torch.from_numpy(a).to('mps').unsqueeze(0)", "x = torch.from_numpy(a).float().to('mps').unsqueeze(0)"),
    ("x = torch.from_numpy(a).to(device=dev)", "x = torch.from_numpy(a).float().to(device=dev)"),
    ("x = torch.from_numpy(a).cuda()", "x = torch.from_numpy(a).float().cuda()"),
])
def test_to_device_alone_is_not_a_conversion(src: str, want: str) -> None:
    assert one(src) == want


@pytest.mark.parametrize("src", [
    "x = torch.from_numpy(a).float()",
    "x = torch.from_numpy(a).to(torch.float32)",
    "x = torch.from_numpy(a).to(dtype=torch.float32)",
    "x = torch.from_numpy(a).to(device, torch.float32)",
    "x = torch.from_numpy(a).to(device, dtype=torch.float16)",
    "x = torch.from_numpy(a).to(device).float()",
    "x = torch.from_numpy(a).half()",
    "x = torch.from_numpy(a).bfloat16()",
    "x = torch.from_numpy(a).long()",
    "x = torch.from_numpy(a).to(torch.int64)",
])
def test_a_dtype_of_its_own_is_a_conversion(src: str) -> None:
    assert one(src) is None


def test_explicit_float64_is_rewritten_once() -> None:
    assert one("x = torch.from_numpy(a).to(device, torch.float64)") == "x = torch.from_numpy(a).to(device, torch.float32)"
    assert one("x = torch.from_numpy(a).double()") == "x = torch.from_numpy(a).float()"


@pytest.mark.parametrize(("src", "want"), [
    ('x = f("é", torch.from_numpy(a).to(device))', 'x = f("é", torch.from_numpy(a).float().to(device))'),
    ('名前 = "数据"; w = torch.zeros(3, dtype=torch.float64)', "w = torch.zeros(3, dtype=torch.float32)"),
    ('w = g("中文字符串", torch.zeros(3, dtype=torch.float64))', 'w = g("中文字符串", torch.zeros(3, dtype=torch.float32))'),
    ('m = Net("ü").double().to(dev)  # 模型', 'm = Net("ü").float().to(dev)'),
])
def test_non_ascii_before_the_expression(src: str, want: str) -> None:
    assert one(src) == want


def test_other_makers_with_non_ascii_lines() -> None:
    src = ('import torch\n'
           'x = torch.from_numpy(a)  # 第一\n'
           'print("é"); w = torch.ones(2, dtype=torch.double)\n')
    assert _other_makers(src, ast.parse(src), 2) == [(3, "w = torch.ones(2, dtype=torch.float32)")]


def test_makers_found_in_the_script_are_the_whole_fix_code(tmp_path) -> None:
    """Sweep s52 a12: the float64 ops ran at `loss.backward()`, the tensors were made at lines
    14-16 (`torch.from_numpy(...)`, `.double()`). The fix's code began with the general
    `x = torch.from_numpy(array).float().to(device)`, naming an `array` the script has not,
    before the script's own lines: now the script's lines alone, rewritten."""
    from types import SimpleNamespace

    from mpsprofiler.diagnosis.analyzers.float64_fix import float64_fix_facts

    script = tmp_path / "mac.py"
    script.write_text("import numpy as np, torch\nX = torch.from_numpy(np.zeros((4, 2)))\n"
                      "model = torch.nn.Linear(2, 1).double()\nloss = model(X).sum()\nloss.backward()\n")
    site = SimpleNamespace(file=str(script), line=5)
    session = SimpleNamespace(run={"cwd": str(tmp_path), "script": "mac.py"}, model={"default_dtype": "float32"},
                              ops=SimpleNamespace(top_float64=lambda n: [site], float64_calls=3))
    facts = float64_fix_facts(session)  # type: ignore[arg-type]
    assert facts["float64_fix_where"] == "makers", facts
    assert facts["float64_fix_code"] == ("X = torch.from_numpy(np.zeros((4, 2))).float()  # line 2\n"
                                         "model = torch.nn.Linear(2, 1).float()  # line 3"), facts
