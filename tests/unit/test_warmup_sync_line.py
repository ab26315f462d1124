"""long-warmup's timing snippet waits for the device the run used, and runs as written there:
``torch.mps.synchronize()`` raises where there is no MPS device (torch/mps/__init__.py calls
into the MPS backend), so a CPU or CUDA run's snippet must not call it."""

from __future__ import annotations

import re
import textwrap
from typing import Any

import pytest

from mpsprofiler.diagnosis.engine import evaluate
from mpsprofiler.diagnosis.rules import builtin_rules_dir, load_rules

FACTS = {"warmup_steps": 11, "warmup_cost_s": 2.0, "warmup_share": 0.3, "warmup_above_steady_share": 1.0,
         "warmup_core_wait_share": 0.0, "warmup_s": 2.0, "warmup_slowest_step_ms": 2001.0, "step_ms": 0.1,
         "warmup_own_work_steps": 0, "warmup_own_work_s": 0.0, "benchmark_from_step": 11, "warmup_start_step": 0}


def _snippet(device: str) -> str:
    rules = [r for r in load_rules([builtin_rules_dir() / "long-warmup.yaml"]) if r.id == "long-warmup"]
    found: list[Any] = evaluate(rules, {**FACTS, "warmup_sync_line": device, "device_kind": device}, device)
    assert found, device
    code = re.search(r"```python\n(.*?)```", found[0].fix, re.S)
    assert code is not None, found[0].fix
    return textwrap.dedent(code.group(1))


@pytest.mark.parametrize(("device", "calls"), [("cpu", []), ("cuda", ["torch.cuda.synchronize()"]),
                                                ("mps", ["torch.mps.synchronize()"])])
def test_the_timing_snippet_synchronizes_the_runs_own_device_only(device: str, calls: list[str]) -> None:
    code = _snippet(device)
    compile(code.replace("...", "pass"), "<fix>", "exec")  # Python as written
    lines = [line.split("#")[0] for line in code.splitlines()]
    assert [c for line in lines for c in re.findall(r"torch\.\w+\.synchronize\(\)", line)] == calls, code
