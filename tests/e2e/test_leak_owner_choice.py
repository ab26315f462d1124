"""Which line keeps a leaked tensor when a class adds to several containers (issue 28).

``probe/leak_owner.find_owner`` goes from the tensor to the container that holds it (by
identity) and to the object whose attribute it is; the line it names must be the one that
puts this tensor there: a line of the owner's own class (another class of the file, a
callback, may add to a ``self.outs`` of its own), adding a value that can be the tensor
(not ``loss.item()``, nor ``x.detach()`` for a tensor with a graph). When that cannot be
told, no line is named. The fix (``diagnosis/analyzers/leak_fix.py``) rewrites only a line
that adds a tensor to the container named, and bounds the container where the owner's
class makes it.

The classes below are the user's code the probe reads (this file is their source).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from mpsprofiler import events
from mpsprofiler.diagnosis import diagnose
from mpsprofiler.probe.leak_owner import find_owner
from mpsprofiler.probe.ops_leaks import _adding_lines
from mpsprofiler.session.session import Session
from tests.helpers import REPO, child_env, mpsprof_cli

HERE = Path(__file__)
SCRIPT = REPO / "tests" / "scripts_leaks" / "callback_and_module_outs.py"


class LossHistory:
    """A callback of the same file: numbers in a `self.outs` of its own."""

    def __init__(self) -> None:
        self.outs: list[Any] = []

    def on_train_batch_end(self, loss: torch.Tensor) -> None:
        self.outs.append(loss.item())  # callback: numbers


class Module:
    """A LightningModule as the leak check meets it: a number per step in `self.losses`,
    then the logits in `self.outs`."""

    def __init__(self) -> None:
        self.losses: list[Any] = []
        self.outs: list[Any] = []

    def on_train_epoch_start(self, loss: torch.Tensor) -> None:
        self.outs.append(float(loss))  # module: a number into the same list

    def training_step(self, loss: torch.Tensor, logits: torch.Tensor) -> None:
        self.losses.append(loss.item())
        self.outs.append(logits.detach())  # module: detached
        self.outs.append(logits)  # module: the leak


class Cache:
    """A number and a detached tensor into one list: the tensor can only come from the second."""

    def __init__(self) -> None:
        self.outs: list[Any] = []

    def training_step(self, loss: torch.Tensor, h: torch.Tensor) -> None:
        self.outs.append(loss.item())  # cache: a number
        self.outs.append(h.detach())  # cache


class Twice:
    """Two tensors added to one list by two lines: which one this tensor came from cannot be told."""

    def __init__(self) -> None:
        self.outs: list[Any] = []

    def training_step(self, logits: torch.Tensor, feats: torch.Tensor) -> None:
        self.outs.append(logits)  # twice: logits
        self.outs.append(feats)  # twice: feats


def _line(text: str, path: Path = HERE) -> int:
    return next(i for i, t in enumerate(path.read_text().splitlines(), 1) if text in t)


def _is_user(code: Any) -> bool:
    return bool(code.co_filename == __file__)


def test_the_line_that_adds_this_tensor_is_named_not_the_first_adding_line() -> None:
    """The callback's `self.outs.append(loss.item())` comes first in the file, the module's
    `self.outs.append(float(loss))` first in its class: neither can hold a tensor; the
    tensor has a graph, so `logits.detach()` is not it either."""
    history, module = LossHistory(), Module()
    loss = torch.ones(2, requires_grad=True).sum()
    logits = torch.ones(3, requires_grad=True) * 2
    history.on_train_batch_end(loss)
    module.on_train_epoch_start(loss.detach())
    module.training_step(loss, logits)
    found = find_owner(logits, _is_user, _adding_lines)
    assert found is not None
    assert (found["name"], found["owner"], found["file"]) == ("self.outs", "Module", __file__)
    assert found["line"] == _line("self.outs.append(logits)  # module: the leak")


def test_a_plain_tensor_is_the_line_that_can_add_one() -> None:
    cache = Cache()
    h = torch.ones(3, requires_grad=True) * 2
    cache.training_step(h.sum(), h)
    kept = cache.outs[-1]
    found = find_owner(kept, _is_user, _adding_lines)
    assert found is not None and found["line"] == _line("self.outs.append(h.detach())  # cache")


def test_no_line_is_named_when_it_cannot_be_told() -> None:
    twice = Twice()
    logits, feats = torch.ones(3), torch.ones(4)
    twice.training_step(logits, feats)
    assert find_owner(logits, _is_user, _adding_lines) is None


def _leak_session(holder_line: int) -> Session:
    """A recording whose leak site's container line is ``holder_line`` of the script."""
    holder = {"name": "self.outs", "file": str(SCRIPT), "line": holder_line, "code": "", "size": 40, "step": 30,
              "size0": 20, "step0": 10}
    site: dict[str, Any] = {"file": str(SCRIPT), "line": _line("logits = self.net(x)", SCRIPT), "module": "net.2",
                            "op": "aten::addmm", "code": "logits = self.net(x)", "alive": 20, "bytes": 20 * 2048,
                            "steps": [3, 5], "grad": True, "holder": holder}
    lines = [events.encode(events.KIND_HELLO, 0.0, schema=events.SCHEMA_VERSION, pid=1),
             events.encode(events.KIND_LEAKS, 10.0, step=30, lag=2, sites=[site], carries=[])]
    session = Session()
    session.feed_many(events.decode(line) for line in lines)
    return session


def test_the_fix_bounds_the_container_where_its_own_class_makes_it() -> None:
    facts = diagnose(_leak_session(_line("self.outs.append(logits)", SCRIPT))).facts
    code = facts["leak_site_fix_code"]
    assert code.startswith("self.outs.append(logits.detach())"), code
    # the classifier's `self.outs = []`, not the callback's (first in the file)
    made = [i for i, t in enumerate(SCRIPT.read_text().splitlines(), 1) if t.strip() == "self.outs = []"]
    assert len(made) == 2 and f"(line {made[1]})" in code, code


def test_a_line_adding_a_number_is_never_rewritten_as_the_leak() -> None:
    """A container line that adds `loss.item()` (named by an older probe) keeps no tensor:
    the fix is the general one, not `loss.item().mean().item()`."""
    facts = diagnose(_leak_session(_line("self.outs.append(loss.item())", SCRIPT))).facts
    code = facts["leak_site_fix_code"]
    assert "loss.item()." not in code and "self.outs.append(loss" not in code, code


@pytest.mark.slow
def test_a_lightning_shaped_module_names_its_own_append(tmp_path: Path) -> None:
    """Through the real CLI: the loop holds the module only through its own list (no user
    frame has it at a step boundary, as with Lightning), a callback of the same file adds
    numbers to a `self.outs` of its own first."""
    out = tmp_path / "run"
    proc = mpsprof_cli("run", "--headless", "-o", str(out), str(SCRIPT), "240", cwd=REPO, env=child_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    found = [f for f in summary["findings"] if f["rule"] == "leak-site-graph"]
    assert len(found) == 1, [f["rule"] for f in summary["findings"]]
    f = found[0]
    append = _line("self.outs.append(logits)", SCRIPT)
    assert f"callback_and_module_outs.py:{append}" in f["title"], f["title"]
    assert f"added to at callback_and_module_outs.py:{append} (`self.outs.append(logits)`)" in f["evidence"]
    code = f["fix"].split("```python\n", 1)[1].split("```", 1)[0]
    assert code.startswith("self.outs.append(logits.detach())"), code
    made = [i for i, t in enumerate(SCRIPT.read_text().splitlines(), 1) if t.strip() == "self.outs = []"]
    assert f"(line {made[1]})" in code, code


ADDING = '''\
outs = []
kept = []


def log_number(v):
    outs.append(float(v))  # a number, first in the file


def train_step(logits):
    outs.append(logits.detach())  # detached
    outs.append(logits)  # the graph


def remember(t):
    kept.append(t.item())  # a number
    kept.append(t)  # the tensor
'''


def _codes(tmp_path: Path) -> tuple[str, dict[str, Any]]:
    path = tmp_path / "user.py"
    path.write_text(ADDING)
    names: dict[str, Any] = {}
    exec(compile(ADDING, str(path), "exec"), names)
    return str(path), {k: v.__code__ for k, v in names.items() if callable(v) and hasattr(v, "__code__")}


def _at(text: str) -> int:
    return next(i for i, t in enumerate(ADDING.splitlines(), 1) if text in t)


def test_the_frame_search_names_the_line_that_can_add_this_tensor(tmp_path: Path) -> None:
    """ops_leaks' own search (the container found in a user frame): the first adding line of
    the function on the stack used to be named whatever it added (`.detach()` for a graph)."""
    from mpsprofiler.probe.ops_leaks import _adding_line

    file, codes = _codes(tmp_path)
    step = [codes["train_step"]]
    assert _adding_line(file, "outs", step, grad=True) == _at("# the graph")
    assert _adding_line(file, "outs", step, grad=False) == _at("# detached")


def test_outside_the_stack_a_line_is_named_only_when_one_alone_can_add_it(tmp_path: Path) -> None:
    """No function of the stack adds to the container: the first adding line of the file
    (a number into `outs`) used to be named; now only a line that alone can add the tensor."""
    from mpsprofiler.probe.ops_leaks import _adding_line

    file, _ = _codes(tmp_path)
    assert _adding_line(file, "outs", [], grad=True) == _at("# the graph")
    assert _adding_line(file, "kept", [], grad=False) == _at("# the tensor")
    assert _adding_line(file, "outs", [], grad=False) is None  # detached or the graph: not told
    assert _adding_line(file, "missing", [], grad=True) is None


def test_a_list_under_a_key_of_a_dict_is_the_holder_and_a_tensor_value_leaves_the_dict() -> None:
    """A dict of lists (`history["out"].append(out)`): the holder is `history['out']`, that
    list (its length is the growth), and the line that adds to it is found by that name; a
    dict whose values are the tensors themselves (`cache[step] = out`) is the holder itself."""
    from mpsprofiler.probe.ops_leaks import _holder_in

    kept = torch.ones(2, requires_grad=True) * 2
    history: dict[Any, list[Any]] = {"step": [1, 2], 3: [kept]}
    cache = {7: kept}
    found = _holder_in(sys._getframe(), kept, set())
    assert found is not None and found[0] in ("history[3]", "cache")
    del cache
    name, container = _holder_in(sys._getframe(), kept, set()) or ("", None)
    assert name == "history[3]" and container is history[3]
    history[3].append(kept)  # the line that adds
    line = next(i for i, t in enumerate(HERE.read_text().splitlines(), 1) if "# the line that adds" in t)
    assert line in _adding_lines(str(HERE), "history[3]")
    del history[3], found, container
    cache = {7: kept}
    assert _holder_in(sys._getframe(), kept, set()) == ("cache", cache)
