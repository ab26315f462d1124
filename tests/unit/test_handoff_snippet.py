"""dataloader-handoff's snippet indexes the batches the dataset returns.

Before: one snippet for every dataset, ``xs, ys = map(torch.stack, zip(*(dataset[i] ...)))``.
On a dataset that returns dicts (``{"input": x, "label": y}``) that zips the dicts' keys and
``torch.stack`` raises ``TypeError: expected Tensor as element 0 in argument 0, but got str``:
the fix, applied as written, crashed. The probe records the batch's shape (``batch_form``)
and each shape gets a snippet that runs on it (executed here), or no snippet at all."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch

from mpsprofiler.diagnosis.engine import phrase_for
from mpsprofiler.diagnosis.rules import builtin_rules_dir, load_rules
from mpsprofiler.probe.loader_sites import batch_form


def _phrase(form: str) -> str:
    rule = next(r for r in load_rules([builtin_rules_dir() / "dataloader-stall.yaml"]) if r.id == "dataloader-handoff")
    facts = {"batch_form": form, "loader_name": "built", "loader_which": "only", "loader_name_place": "train.py:13",
             "batch_size_arg": "8"}
    return phrase_for(rule.phrases, facts, "batch_form", ()) or ""


def _dataset(form: str) -> list[Any]:
    g = torch.Generator().manual_seed(0)
    if form == "dict":
        return [{"input": torch.randn(4, generator=g), "label": torch.tensor(i % 3)} for i in range(20)]
    return [(torch.randn(4, generator=g), torch.tensor(i % 3)) for i in range(20)]


def test_the_probe_names_the_batch_form() -> None:
    x, y = torch.zeros(2, 3), torch.zeros(2)
    assert batch_form((x, y)) == batch_form([x, y]) == "pair"
    assert batch_form({"input": x, "label": y}) == "dict"
    assert batch_form((x, y, y)) == "mixed"
    assert batch_form({"input": x, "meta": {"idx": y}}) == "mixed"
    assert batch_form({"input": x, "name": ["a", "b"]}) == "mixed"
    assert batch_form({}) == batch_form(x) == "mixed"


@pytest.mark.parametrize("form", ["pair", "dict", "unknown"])
def test_each_snippet_runs_on_the_samples_it_is_shown_for(form: str) -> None:
    text = _phrase(form)
    code = re.search(r"```python\n(.*?)```", text, re.S)
    assert code is not None, text
    scope: dict[str, Any] = {"torch": torch, "dataset": _dataset(form), "steps": 3}
    exec(code.group(1), scope)
    if form == "dict":
        assert "(its samples are dicts of tensors)" in text
        assert scope["batch"]["input"].shape == (8, 4) and scope["batch"]["label"].shape == (8,)
    else:
        assert scope["x"].shape == (8, 4) and scope["y"].shape == (8,)


def test_the_pair_snippet_on_dict_samples_was_the_crash() -> None:
    code = re.search(r"```python\n(.*?)```", _phrase("pair"), re.S)
    assert code is not None
    with pytest.raises(TypeError, match="got str"):
        exec(code.group(1), {"torch": torch, "dataset": _dataset("dict"), "steps": 3})


def test_batches_no_snippet_fits_get_the_advice_without_code() -> None:
    text = _phrase("mixed")
    assert "```" not in text and "the DataLoader built at train.py:13" in text
    assert "each tensor field stacked into one tensor" in text
