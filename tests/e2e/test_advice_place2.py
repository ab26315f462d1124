"""Unseen shapes (issue 26's done-when): each finding names the user's object and line, and
its snippet is that line rewritten. One real run per shape, through the real CLI, shared
by its tests (module-scoped)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import REPO, fix_code, line_of, one_finding, run_summary

PLACE = REPO / "tests" / "scripts_place2"
pytestmark = pytest.mark.slow
_finding = one_finding
_code = fix_code


def _profile(tmp: Path, script: str, *args: str) -> dict[str, Any]:
    """SCRIPT ARGS (the script's own) profiled from the repository root (tests.helpers.run_summary)."""
    return run_summary(tmp / "run", str(PLACE / script), *args)


def _line(script: str, text: str) -> int:
    return line_of(PLACE / script, text)


@pytest.fixture(scope="module")
def three_loaders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _profile(tmp_path_factory.mktemp("three"), "three_loaders.py", "60")


def test_the_slow_middle_loader_built_in_a_helper_is_named(three_loaders: dict[str, Any]) -> None:
    # a stall on a quiet machine, CPU contention on a loaded one: either names the loader
    f = _finding(three_loaders, "dataloader-stall", "dataloader-stall-critical", "dataloader-cpu-contention")
    place = f"tests/scripts_place2/three_loaders.py:{_line('three_loaders.py', 'return DataLoader(Records()')}"
    assert "the 2nd DataLoader built at " + place in f["evidence"], f["evidence"]
    assert re.findall(r"batch of (\d+) samples", f["evidence"]) == ["8"], f["evidence"]  # its own figures
    if f["rule"] != "dataloader-cpu-contention":
        code = re.sub(r"\s+", "", _code(f))  # the user's own arguments, however the call is wrapped
        assert code.startswith("returnDataLoader(Records(),batch_size=batch,drop_last=True,num_workers="), code
        from mpsprofiler.diagnosis.facts import collect_facts
        from mpsprofiler.experiment.candidates import candidate_for
        from mpsprofiler.session.recording import load_runs

        c = candidate_for(f, collect_facts(load_runs([three_loaders["_dir"]]).session))
        assert c is not None and list(c.settings["dataloader"]) == ["2"], c.settings
    elif "set_num_threads" not in f["fix"]:  # torch already within the free cores: no count to set
        from mpsprofiler.diagnosis.facts import collect_facts
        from mpsprofiler.session.recording import load_runs

        facts = collect_facts(load_runs([three_loaders["_dir"]]).session)
        assert facts["thread_cut"] == "enough" and facts["torch_threads"] <= facts["suggested_torch_threads"], facts
        assert "fewer threads would not help" in " ".join(f["fix"].split()), f["fix"]
    else:  # the thread advice counts the cores other programs left: never more threads
        m = re.search(r"torch\.set_num_threads\((\d+)\)", _code(f))
        assert m is not None and int(m.group(1)) <= f["facts"]["cores"], f["fix"]


def test_threads_set_to_every_cpu_in_a_config_function_are_rewritten(tmp_path: Path) -> None:
    summary = _profile(tmp_path, "threads_config.py", "30")
    f = _finding(summary, "thread-oversubscription")
    place = f"tests/scripts_place2/threads_config.py:{_line('threads_config.py', 'torch.set_num_threads(2 * (os.cpu_count()')}"
    assert place in f["fix"], f["fix"]
    m = re.fullmatch(r"torch\.set_num_threads\((\d+)\)", _code(f).strip())
    assert m is not None and 1 <= int(m.group(1)) <= f["facts"]["cores"], _code(f)


def test_a_plain_tensor_appended_to_self_history_names_the_attribute(tmp_path: Path) -> None:
    summary = _profile(tmp_path, "history_on_self.py", "400")
    f = _finding(summary, "leak-site-container")
    append = _line("history_on_self.py", "self.history.append(snapshot)")
    assert f"history_on_self.py:{append}" in f["title"] and "kept in `self.history`" in f["evidence"], f
    code = _code(f)
    assert code.startswith("self.history.append(snapshot.mean().item())"), code
    made = _line("history_on_self.py", "self.history = []")
    assert f"(line {made})" in code and "self.history = collections.deque(maxlen=" in code, code


def test_float64_from_numpy_in_the_dataset_is_the_line_rewritten(tmp_path: Path) -> None:
    summary = _profile(tmp_path, "float64_numpy.py", "30")
    f = _finding(summary, "float64-mps")
    line = _line("float64_numpy.py", "x = torch.from_numpy(self.rows[i])")
    assert f"tests/scripts_place2/float64_numpy.py:{line}" in f["fix"], f["fix"]
    code = _code(f)
    assert code.startswith("x = torch.from_numpy(self.rows[i]).float()\n"), code
    model = _line("float64_numpy.py", "nn.Linear(16, 1).double()")
    assert f"model = nn.Linear(16, 1).float()  # line {model}" in code, code


def test_float32_rewrite_of_one_line() -> None:
    import ast

    from mpsprofiler.diagnosis.analyzers.float64_fix import _float32

    def one(src: str) -> str | None:
        return _float32(src, ast.parse(src).body[0])

    assert one("x = torch.from_numpy(a[i])") == "x = torch.from_numpy(a[i]).float()"
    assert one("x = torch.from_numpy(a).float()") is None  # already float32
    assert one("w = torch.zeros(3, dtype=torch.float64)") == "w = torch.zeros(3, dtype=torch.float32)"
    assert one("m = Net().double().to(dev)") == "m = Net().float().to(dev)"
    assert one("y = x + 1") is None


def test_float64_from_the_default_dtype_names_the_call_that_set_it(tmp_path: Path) -> None:
    """No line names float64: `torch.set_default_dtype(torch.float64)` (in a helper) made every
    factory's tensor float64. The fix names that call, and `mpsprof patch` rewrites it; run with
    float32 (the call skipped at run time) the script gets no float64 finding."""
    from tests.helpers import mpsprof_cli

    summary = _profile(tmp_path, "default_float64.py")
    f = _finding(summary, "float64-mps")
    line = _line("default_float64.py", "torch.set_default_dtype(torch.float64)")
    assert f"makes float64 torch's default dtype at tests/scripts_place2/default_float64.py:{line}" in f["fix"], f["fix"]
    assert _code(f).strip() == "torch.set_default_dtype(torch.float32)", _code(f)
    patch = mpsprof_cli("patch", str(tmp_path / "run"), "--rule", "float64-mps", cwd=REPO)
    assert "-        torch.set_default_dtype(torch.float64)\n+        torch.set_default_dtype(torch.float32)" in patch.stdout, \
        patch.stdout + patch.stderr
    clean = _profile(tmp_path / "single", "default_float64.py", "single")
    assert not [f for f in clean["findings"] if f["rule"].startswith("float64")], clean["findings"]
