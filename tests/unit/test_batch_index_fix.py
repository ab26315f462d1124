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


def test_a_loader_with_workers_is_rewritten_without_them_and_runs_as_written(tmp_path: Path) -> None:
    """The fix's words: "index whole batches in the training process instead
    (num_workers=0)"; its snippet kept the loader's 2 spawned workers and their arguments
    (a spawn-context loader with a worker_init_fn, a sweep script's). Now num_workers=0,
    without the arguments DataLoader refuses with it (persistent_workers, prefetch_factor,
    multiprocessing_context): executed, the same batches in the same order."""
    line = ("dl = DataLoader(ds, batch_size=8, shuffle=True, generator=g, num_workers=2, persistent_workers=True,"
            " prefetch_factor=4, multiprocessing_context='spawn', worker_init_fn=print, timeout=30)")
    script = tmp_path / "s.py"
    script.write_text(SETUP + line + "\n")
    code = batch_index_facts({"file": str(script), "line": SETUP.count("\n") + 1, "sampler": "RandomSampler"},
                             "8")["batch_index_code"]
    assert "num_workers=0," in code, code
    for gone in ("persistent_workers", "prefetch_factor", "multiprocessing_context", "worker_init_fn", "timeout"):
        assert gone not in code, code
    assert _batches(code) == _batches("dl = DataLoader(ds, batch_size=8, shuffle=True, generator=g)")


@pytest.mark.parametrize("line", ["dl = DataLoader(ds, batch_size=8, **kw)",
                                  "dl = DataLoader(ds, batch_size=8, collate_fn=list)"])
def test_a_line_the_rewrite_cannot_keep_gets_the_recorded_order_with_generic_names(tmp_path: Path, line: str) -> None:
    script = tmp_path / "s.py"
    script.write_text(SETUP + "kw = {}\n" + line + "\n")
    facts = batch_index_facts({"file": str(script), "line": SETUP.count("\n") + 2, "sampler": "SequentialSampler"}, "8")
    assert "SequentialSampler(dataset)" in facts["batch_index_code"] and "RandomSampler" not in facts["batch_index_code"]
    assert facts["batch_index_order"] == "sequential"
    shuffled = batch_index_facts({"sampler": "RandomSampler"}, "8")
    assert "RandomSampler(dataset)" in shuffled["batch_index_code"] and shuffled["batch_index_order"] == "random"


def test_a_dataset_built_inside_the_call_is_built_once_before_the_line(tmp_path: Path) -> None:
    line = "dl = DataLoader(TensorDataset(torch.arange(50).float(), torch.arange(50)), batch_size=8, shuffle=True)"
    script = tmp_path / "s.py"
    script.write_text(SETUP + line + "\n")
    facts = batch_index_facts({"file": str(script), "line": SETUP.count("\n") + 1, "sampler": "RandomSampler"}, "8")
    code = facts["batch_index_code"]
    assert code.splitlines()[2].startswith("dataset = TensorDataset(") and code.count("TensorDataset(") == 1, code
    assert code.splitlines()[3] == "dl = DataLoader(", code
    assert _batches(code) == _batches(line)


HELPER = ("def make_loader(n, batch_size, shuffle):\n"
          "    return DataLoader(TensorDataset(torch.arange(n).float(), torch.arange(n)), batch_size=batch_size,\n"
          "                      shuffle=shuffle)\n")


def test_a_helper_that_returns_the_loader_gets_its_return_line_in_its_callers_orders(tmp_path: Path) -> None:
    """pytorch/examples' layout, a loader inside a function: ``return DataLoader(MyData(n),
    batch_size=batch_size, shuffle=shuffle)`` got the generic ``loader = DataLoader(dataset,
    ...)`` with ``RandomSampler``: ``dataset`` exists nowhere there, and the helper also
    builds the unshuffled test loader. Now the helper's own return line, its dataset built
    once and the sampler following its ``shuffle``: the same batches for either caller."""
    script = tmp_path / "s.py"
    script.write_text(SETUP + HELPER)
    facts = batch_index_facts({"file": str(script), "line": SETUP.count("\n") + 2, "sampler": "RandomSampler"}, "64")
    code = facts["batch_index_code"]
    assert facts["batch_index_order"] == "either"
    body = code.split("\n\n", 1)[1]
    assert body.startswith("dataset = TensorDataset(") and "\nreturn DataLoader(\n" in body, code
    assert "RandomSampler(dataset) if shuffle else SequentialSampler(dataset)" in code and "batch_size=batch_size" in code
    fixed = code.split("\n\n", 1)[0] + "\n" + "def make_loader(n, batch_size, shuffle):\n" + "".join(
        f"    {ln}\n" for ln in body.splitlines())
    for shuffle in (True, False):
        call = f"dl = make_loader(50, 8, {shuffle})"
        assert _batches(fixed + call) == _batches(HELPER + call)
