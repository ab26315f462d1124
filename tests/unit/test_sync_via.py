"""A sync made by library code inside the user's line records that library frame (``via``).

A framework's training loop reads tensors on the user's behalf (the Hugging Face Trainer's
NaN/inf loss filter inside ``trainer.train()``): the script's line is all the user can
point at, and the setting that stops the reads belongs to the library frame the calls
passed through (``diagnosis/analyzers/sync_fix.py``). Here a package installed in a
``site-packages`` folder (what the op sampler counts as library code) makes the reads.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from mpsprofiler.probe.ops import OpAccountant
from mpsprofiler.probe.ops_sites import STATEMENT_LINES, statement_text
from mpsprofiler.session.ops import OpStats
from ops_driver import StepDriver, ops_events, private_cache, recorder  # noqa: F401

LIBRARY = '''import torch


def finite(loss):
    if (
        torch.isnan(loss) or torch.isinf(loss)
    ):
        return False
    return True
'''


@pytest.fixture
def fakelib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    package = tmp_path / "site-packages" / "fakelib_for_via"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(LIBRARY)
    monkeypatch.syspath_prepend(str(tmp_path / "site-packages"))
    import fakelib_for_via

    yield fakelib_for_via
    sys.modules.pop("fakelib_for_via", None)


def test_a_sync_made_inside_library_code_records_its_frame_and_statement(fakelib: Any) -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(8, 4)
    events, emit = recorder()
    with StepDriver(OpAccountant(emit, every_step=True)):
        for _ in range(4):
            loss = model(x).pow(2).mean()
            loss.backward()
            fakelib.finite(loss.detach())
            line = sys._getframe().f_lineno - 1
            loss.detach().item()  # the script's own read: no library frame
            own = sys._getframe().f_lineno - 1
            opt.step()
            opt.zero_grad()
    syncs = [s for e in ops_events(events) for s in e["syncs"]]
    through = [s for s in syncs if s["line"] == line]
    assert through and all(s["file"] == __file__ for s in through)
    via = through[0]["via"]
    assert via["file"] == fakelib.__file__ and via["function"] == "finite"
    assert via["line"] == 5 and via["code"] == "if ( torch.isnan(loss) or torch.isinf(loss) ):"
    assert sum(s["calls"] for s in through) == 2 * len(ops_events(events))  # isnan, then isinf, each step
    direct = [s for s in syncs if s["line"] == own]
    assert direct and all("via" not in s for s in direct)
    # the session keeps the frame most of a line's calls came through
    stats = OpStats()
    for event in ops_events(events):
        stats.feed(event)
    row = next(r for r in stats.top_syncs() if r.line == line)
    assert row.via == (fakelib.__file__, 5, "finite", via["code"])
    exported = next(s for s in stats.to_dict()["syncs"] if s["line"] == line)
    assert exported["via"]["function"] == "finite" and "via" not in next(
        s for s in stats.to_dict()["syncs"] if s["line"] == own)


def test_statement_text_joins_a_statement_over_its_lines(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("x = f(a,\n      b)\nif (\n    c\n    and d\n):\n    pass\n" + "y = (\n" * 10)
    assert statement_text(str(src), 1) == "x = f(a, b)"
    assert statement_text(str(src), 3) == "if ( c and d ):"
    assert statement_text(str(src), 7) == "pass"
    assert statement_text(str(src), 8).count("y = (") == STATEMENT_LINES  # never more lines than that
    assert statement_text(str(tmp_path / "gone.py"), 3) == ""
