"""``mpsprof patch`` never skips a finding in silence: a finding it writes no patch for gets
one ``not patched: <rule>: <what to edit by hand> (<why>)`` line, printed and kept in
``RUN_DIR/fix-<rule>.not-patched.txt``; pageable-copies' ``pin_memory=True`` and a stall
fix's ``prefetch_factor`` are written on the loader the finding names.

Real scripts (tests/scripts_patch/) through the real CLI. pageable-copies fires on CUDA
only: on a machine without it, its finding is made here over a real recording (the loader's
place comes from that recording), as tests/e2e/test_patch.py does for the MPS-only rules."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import REPO, Recorded, child_env

SCRIPTS = REPO / "tests" / "scripts_patch"


def _applies(rec: Recorded, patch: Path, tmp: Path) -> Path:
    """The patch passes ``git apply --check`` and ``patch -p1 --dry-run`` in a fresh git
    repository holding the script's directory; returns that copy, patched."""
    repo = tmp / "repo"
    shutil.copytree(rec.dir, repo)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    git = subprocess.run(["git", "apply", "--check", str(patch)], cwd=repo, capture_output=True, text=True)
    assert git.returncode == 0, git.stderr
    dry = subprocess.run(["patch", "-p1", "--dry-run", "-i", str(patch)], cwd=repo, capture_output=True, text=True)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    subprocess.run(["git", "apply", str(patch)], cwd=repo, check=True)
    return repo


@pytest.fixture(scope="module")
def oom(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    return Recorded(tmp_path_factory.mktemp("oom"), SCRIPTS / "oom_cpu.py")


@pytest.mark.slow
def test_a_finding_without_a_planner_is_said_with_its_line_and_kept(oom: Recorded) -> None:
    assert "oom-crash-cpu" in oom.rules, oom.rules
    proc = oom.patch()
    assert proc.returncode == 0, proc.stderr
    line = re.search(r"^not patched: oom-crash-cpu: edit oom_cpu\.py:15 by hand: .+ \(.+\)$", proc.stdout, re.M)
    assert line is not None, proc.stdout
    kept = oom.run / "fix-oom-crash-cpu.not-patched.txt"
    assert kept.read_text() == line.group(0) + "\n"
    for rule in oom.rules:  # never silent: every finding has a patch or its line
        assert (oom.run / f"fix-{rule}.patch").exists() or f"not patched: {rule}: " in proc.stdout, (rule, proc.stdout)
    alone = oom.patch("--rule", "oom-crash-cpu")
    assert alone.returncode == 0 and line.group(0) in alone.stdout and "not patched: other" not in alone.stdout


def _finding(rule: str, fix: str = "f", **facts: object) -> object:
    from mpsprofiler.diagnosis.findings import Finding

    return Finding(rule=rule, severity="warning", title=rule, evidence="e", fix=fix, facts=dict(facts))


def _rule_fix(rule: str, file: str, **values: str) -> str:
    """The fix text of a shipped rule, its ``{fact}`` fields filled with ``values``."""
    import yaml

    fix = next(r["fix"] for r in yaml.safe_load((REPO / "rules" / file).read_text())["rules"] if r["id"] == rule)
    for name, value in values.items():
        fix = fix.replace("{" + name + "}", value)
    return str(fix)


@pytest.mark.slow
def test_an_environment_fix_says_it_is_no_code_edit_and_shows_the_command(oom: Recorded) -> None:
    """op-not-implemented-crash fires on MPS only: its finding is made here, with the rule's
    own fix text, over the real recording."""
    from mpsprofiler.patch.plan import plan
    from mpsprofiler.session.recording import load_runs

    session = load_runs([oom.run]).session
    fix_text = _rule_fix("op-not-implemented-crash", "op-not-implemented-crash.yaml", crash_op="aten::foo",
                         run_command="python train.py")
    finding = _finding("op-not-implemented-crash", fix_text, crash_op="aten::foo", crash_file=str(oom.script),
                       crash_line=15)
    fix = plan(session, [finding], {})[0]  # type: ignore[list-item]
    assert not fix.planned and not fix.files
    assert fix.not_patched == [
        "not patched: op-not-implemented-crash: the fix is not a code edit: let aten::foo fall back to the CPU: "
        "`PYTORCH_ENABLE_MPS_FALLBACK=1 python train.py` (or replace it at oom_cpu.py:15 by hand) (torch reads "
        "the variable once, when it loads: it belongs to the environment the script starts in)"]
    unknown = plan(session, [_finding("my-own-rule")], {})[0]  # type: ignore[list-item]
    assert unknown.not_patched == ["not patched: my-own-rule: edit oom_cpu.py by hand as the finding's fix says "
                                   "(mpsprof has no patcher for this rule)"]


@pytest.mark.slow
def test_pageable_copies_pins_the_loader_it_names(flat_loader_recorded: Recorded, tmp_path: Path) -> None:
    from mpsprofiler.patch.diff import write_patch
    from mpsprofiler.patch.plan import plan
    from mpsprofiler.session.recording import load_runs

    flat = flat_loader_recorded  # SCRIPTS / "flat_loader.py" with --max-steps 30 (tests/conftest.py)
    session = load_runs([flat.run]).session
    created = next(int(d["created"]) for d in session.dataloaders.values())
    fix = plan(session, [_finding("pageable-copies", pageable_loader=created)], {})[0]  # type: ignore[list-item]
    assert fix.planned and not fix.not_patched, fix.not_patched
    text, path, error = write_patch(flat.run, fix, str(flat.dir))
    assert path == flat.run / "fix-pageable-copies.patch" and error is None
    removed = [x[1:] for x in text.splitlines() if x.startswith("-") and not x.startswith("---")]
    added = [x[1:] for x in text.splitlines() if x.startswith("+") and not x.startswith("+++")]
    assert removed == ["loader = DataLoader(SlowReads(), batch_size=4)"], text
    assert added == ["loader = DataLoader(SlowReads(), batch_size=4, pin_memory=True)"], text
    repo = _applies(flat, path, tmp_path)
    ran = subprocess.run([sys.executable, flat.script.name], cwd=repo, capture_output=True, text=True,
                         env=child_env(), timeout=120)
    assert ran.returncode == 0 and "done" in ran.stdout, ran.stderr[-3000:]
    missing = plan(session, [_finding("pageable-copies", pageable_loader=created + 7)], {})[0]  # type: ignore[list-item]
    assert not missing.files and missing.not_patched == [
        f"not patched: the run recorded no place for DataLoader {created + 7}; set pin_memory=True where it is "
        "built, by hand"]


@pytest.mark.slow
def test_pageable_copies_of_a_library_loader_is_not_patched_but_said(library_loader_recorded: Recorded) -> None:
    from mpsprofiler.patch.plan import plan
    from mpsprofiler.patch.unplanned import planner_line
    from mpsprofiler.session.recording import load_runs

    lib = SCRIPTS / "lib"
    rec = library_loader_recorded  # SCRIPTS / "library_loader.py", --max-steps 30, lib on PYTHONPATH (tests/conftest.py)
    session = load_runs([rec.run]).session
    created = next(int(d["created"]) for d in session.dataloaders.values())
    fix = plan(session, [_finding("pageable-copies", pageable_loader=created)], {})[0]  # type: ignore[list-item]
    assert not fix.files
    where = re.escape(str(lib / "slowdata.py"))
    assert re.fullmatch(rf"not patched: pageable-copies: edit {where}:\d+ by hand: pin_memory=True \(the file is "
                        r"outside the script's directory .*\)", planner_line(fix.rule, fix.not_patched)), fix.not_patched


def test_a_stall_fix_naming_prefetch_factor_sets_it_where_workers_run(tmp_path: Path) -> None:
    from torch.utils.data import DataLoader

    from mpsprofiler.patch.plan import plan
    from mpsprofiler.session.session import Session

    script = tmp_path / "train.py"
    script.write_text("from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=4)\n")
    session = Session()
    session.run.update({"target": str(script), "cwd": str(tmp_path), "started": time.time() + 3600})
    session.dataloaders = {1: {"created": 1, "file": str(script), "line": 2, "num_workers": 0}}  # type: ignore[typeddict-item]
    fix_text = "Build the DataLoader with\n\n```python\nloader = DataLoader(\n    dataset, batch_size=4,\n" \
               "    num_workers=2, persistent_workers=True, prefetch_factor=4,\n)\n```\n"
    stall = _finding("dataloader-stall", fix_text, suggested_num_workers=2, loader_created=1)
    fix = plan(session, [stall], {})[0]  # type: ignore[list-item]
    text = fix.files[str(script.resolve())][1]
    assert "loader = DataLoader(ds, batch_size=4, num_workers=2, persistent_workers=True, prefetch_factor=4)\n" in text
    assert 'if __name__ == "__main__":' in text  # workers for a top-level script: under the guard (spawn)
    scope: dict[str, object] = {"ds": list(range(16)), "DataLoader": DataLoader, "__name__": "__main__"}
    exec(compile(text, "patched.py", "exec"), scope)  # torch takes it: the loader has workers
    assert scope["loader"].prefetch_factor == 4  # type: ignore[attr-defined]
    no_workers = _finding("dataloader-stall", fix_text, suggested_num_workers=0, num_workers=1, loader_created=1)
    fix = plan(session, [no_workers], {})[0]  # type: ignore[list-item]
    assert "prefetch_factor" not in fix.files.get(str(script.resolve()), ("", ""))[1]
    assert any("prefetch_factor needs workers" in x for x in fix.not_patched), fix.not_patched


@pytest.mark.slow
@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="pageable-copies fires on CUDA only")
def test_pageable_copies_on_cuda_through_the_cli(tmp_path: Path) -> None:
    rec = Recorded(tmp_path, SCRIPTS / "pageable_cuda.py")
    assert "pageable-copies" in rec.rules, rec.rules
    proc = rec.patch("--rule", "pageable-copies")
    assert proc.returncode == 0, proc.stderr
    patch = rec.run / "fix-pageable-copies.patch"
    assert "+loader = DataLoader(data, batch_size=96, shuffle=True, pin_memory=True)" in patch.read_text(), proc.stdout
    _applies(rec, patch, tmp_path)
