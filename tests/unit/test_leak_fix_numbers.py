"""The ".item()" alternative of a kept-graph fix: offered only where the script's uses of
the container take numbers (no ``torch.stack``/``cat`` of it, no tensor method on one of
its elements), so that following it as written never breaks the script."""

from __future__ import annotations

import ast

import pytest
import torch

from mpsprofiler.diagnosis.analyzers.leak_fix import number_safe

SAFE = [
    "h = []\nh.append(loss)\nprint(sum(h[-50:]) / 50, len(h), h[-1])\n",
    "h = []\nh.append(loss)\nimport numpy as np\nprint(np.mean(h), float(h[-1]), torch.tensor(h).mean())\n",
    "h = []\nh.append(loss)\nprint(h[-1].is_integer(), max(h))\n",
]
UNSAFE = [
    "h = []\nh.append(loss)\nprint(torch.stack(h[-50:]).mean().item())\n",
    "h = []\nh.append(loss)\nprint(torch.cat([*h]).sum())\n",
    "h = []\nh.append(loss)\nprint(h[-1].item())\n",
    "h = []\nh.append(loss)\nfor v in h:\n    print(v.cpu())\n",
    "h = []\nh.append(loss)\nprint(sum(h).item())\n",
    "h = []\nh.append(loss)\nprint((sum(h) / len(h)).detach())\n",
]


@pytest.mark.parametrize("source", SAFE)
def test_uses_that_take_numbers_get_the_alternative(source: str) -> None:
    assert number_safe(ast.parse(source), "h")


@pytest.mark.parametrize("source", UNSAFE)
def test_uses_that_need_tensors_get_none(source: str) -> None:
    assert not number_safe(ast.parse(source), "h")


def test_the_uses_called_unsafe_do_fail_on_numbers() -> None:
    """What the check encodes, read from torch and Python themselves, not assumed."""
    h = [0.5, 0.25]
    for use in (lambda: torch.stack(h), lambda: torch.cat(h), lambda: h[-1].item(),  # type: ignore[arg-type, attr-defined]
                lambda: sum(h).item()):  # type: ignore[attr-defined]
        with pytest.raises((TypeError, AttributeError)):
            use()
    assert h[-1].is_integer() is False and sum(h[-1:]) == 0.25 and float(torch.tensor(h).mean()) == 0.375
