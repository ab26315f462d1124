"""dataloader-batch-indexing's snippet is the script's DataLoader line in the loader's own
order: executed, the rewritten loader yields the very batches the original does, in the
same order, and leaves the global RNG where the original leaves it (a ``RandomSampler``
for an unshuffled loader shuffled the evaluation and changed the training's shuffle)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from mpsprofiler.diagnosis.analyzers.batch_index_fix import batch_index_facts

SETUP = ("import torch\nfrom torch.utils.data import DataLoader, TensorDataset\n"
         "ds = TensorDataset(torch.arange(50).float(), torch.arange(50))\ng = torch.Generator().manual_seed(3)\n"
         "train = True\n")
LINES = [
    ("dl = DataLoader(ds, batch_size=8)", "sequential"),
    ("dl = DataLoader(ds, batch_size=8, shuffle=True)", "random"),
    ("dl = DataLoader(ds, 8, True, drop_last=True)", "random"),
    ("dl = DataLoader(ds, batch_size=8, shuffle=True, generator=g, drop_last=True)", "random"),
    ("dl = DataLoader(ds, batch_size=8, shuffle=train, num_workers=0)", "either"),
]


def _batches(code: str) -> tuple[list[list[int]], float]:
    """The loader's batches over two passes, and the next draw of the global RNG."""
    scope: dict = {}
    torch.manual_seed(0)
    exec(SETUP + code, scope)
    out = [b[1].tolist() for _ in range(2) for b in scope["dl"]]
    return out, torch.rand(1).item()


@pytest.mark.parametrize("line,order", LINES)
def test_the_rewritten_line_yields_the_same_batches_in_the_same_order(tmp_path: Path, line: str, order: str) -> None:
    script = tmp_path / "s.py"
    script.write_text(SETUP + line + "\n")
    facts = batch_index_facts({"file": str(script), "line": SETUP.count("\n") + 1, "sampler": "SequentialSampler"}, "8")
    code = facts["batch_index_code"]
    assert facts["batch_index_order"] == order
    assert code.splitlines()[2].startswith("dl = DataLoader("), code
    assert "batch_size=None" in code and "dataset" not in code, code
    assert ("RandomSampler" in code) == (order != "sequential"), code
    assert _batches(code) == _batches(line)


@pytest.mark.parametrize("line", ["dl = DataLoader(ds, batch_size=8, **kw)",
                                  "dl = DataLoader(ds, batch_size=8, collate_fn=list)",
                                  "dl = DataLoader(TensorDataset(torch.zeros(4)), batch_size=2)"])
def test_a_line_the_rewrite_cannot_keep_gets_the_recorded_order_with_generic_names(tmp_path: Path, line: str) -> None:
    script = tmp_path / "s.py"
    script.write_text(SETUP + "kw = {}\n" + line + "\n")
    facts = batch_index_facts({"file": str(script), "line": SETUP.count("\n") + 2, "sampler": "SequentialSampler"}, "8")
    assert "SequentialSampler(dataset)" in facts["batch_index_code"] and "RandomSampler" not in facts["batch_index_code"]
    assert facts["batch_index_order"] == "sequential"
    shuffled = batch_index_facts({"sampler": "RandomSampler"}, "8")
    assert "RandomSampler(dataset)" in shuffled["batch_index_code"] and shuffled["batch_index_order"] == "random"
