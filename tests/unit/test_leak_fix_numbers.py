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


HOOK = '''import torch
acts = []


def save(module, inputs, output):
    acts.append(output.detach())


for step in range(300):
    save(None, None, torch.randn(4, 8))
    if step % 100 == 0:
        print(len(acts))
print(torch.stack([a.mean() for a in acts[-10:]]).mean().item() > -100)
'''


def test_a_container_whose_elements_are_used_as_tensors_is_bounded_not_made_numbers(tmp_path) -> None:
    """Sweep s52 a07: a forward hook keeps every activation (``acts.append(output.detach())``)
    and the script later takes ``a.mean()`` of the last 10. leak-site-container's snippet
    ``acts.append(output.detach().mean().item())`` made that line raise AttributeError
    ('float' object has no attribute 'mean'); the list is sliced, so no deque either. The
    fix keeps the tensors and cuts the list to the last 100 after each append, and the
    script so edited runs."""
    from types import SimpleNamespace

    from mpsprofiler.diagnosis.analyzers.leak_fix import KEEP_LAST, keep_fix

    script = tmp_path / "hook.py"
    script.write_text(HOOK)
    site = SimpleNamespace(holder="acts", holder_file=str(script), holder_line=6, grad=False, scalar=False)
    code = keep_fix(site)["leak_site_fix_code"]
    assert ".item()" not in code and "deque" not in code, code
    assert code.splitlines()[:2] == ["acts.append(output.detach())", f"del acts[:-{KEEP_LAST}]  # keep the last "
                                     f"{KEEP_LAST} (a list still: slices and indexing work as before)"], code
    edited = HOOK.replace("    acts.append(output.detach())\n",
                          "".join(f"    {line}\n" for line in code.splitlines()))
    namespace: dict[str, object] = {}
    exec(compile(edited, "hook.py", "exec"), namespace)  # runs to the end: the stack of means works
    assert len(namespace["acts"]) == KEEP_LAST  # type: ignore[arg-type]
    # a container whose uses take numbers keeps the number alternative
    script.write_text(HOOK.replace("torch.stack([a.mean() for a in acts[-10:]]).mean().item() > -100", "len(acts)"))
    assert ".mean().item()" in keep_fix(site)["leak_site_fix_code"]
