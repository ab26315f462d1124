"""``mpsprof patch``: real scripts through the real CLI; every patch must pass ``git apply
--check`` and ``patch -p1 --dry-run`` from the script's directory, and the patched script
must run.

Each script is copied into a temporary directory and profiled once there (module-scoped),
so ``--apply`` and an edit after the run touch only the copy."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO, Recorded, child_env, mpsprof_cli, read_summary

SCRIPTS = REPO / "tests" / "scripts_patch"


def _changed(diff: str) -> tuple[list[str], list[str]]:
    lines = diff.splitlines()
    return ([x[1:] for x in lines if x.startswith("-") and not x.startswith("---")],
            [x[1:] for x in lines if x.startswith("+") and not x.startswith("+++")])


@pytest.fixture(scope="module")
def mnist(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    return Recorded(tmp_path_factory.mktemp("mnist"), SCRIPTS / "mnist.py", "--max-steps", "30")


@pytest.mark.slow
def test_mnist_loader_gets_its_workers_over_train_kwargs(mnist: Recorded, tmp_path: Path) -> None:
    rule = next(r for r in mnist.rules if r.startswith("dataloader-stall"))
    diff = mnist.check_applies_and_runs(rule, tmp_path, "--samples", "48", "--log-interval", "1")
    removed, added = _changed(diff)
    assert removed == ["    train_loader = torch.utils.data.DataLoader(dataset1, **train_kwargs)"], diff
    m = re.fullmatch(r'    train_loader = torch\.utils\.data\.DataLoader\(dataset1, \*\*\{\*\*train_kwargs, '
                     r'"num_workers": (\d+), "persistent_workers": True\}\)', added[0])
    assert m is not None and int(m.group(1)) >= 1, added
    assert "a/mnist.py" in diff and "b/mnist.py" in diff


@pytest.mark.slow
def test_a_file_edited_since_the_run_is_not_patched_but_said(mnist: Recorded, tmp_path: Path) -> None:
    original = mnist.script.read_text()
    stat = mnist.script.stat()
    try:
        mnist.script.write_text(original.replace("    train_loader = torch.utils.data.DataLoader(dataset1, **train_kwargs)\n",
                                                 ""))
        proc = mnist.patch()
        assert proc.returncode == 0, proc.stderr
        assert re.search(r"not patched: edit mnist\.py:\d+ by hand \(num_workers=\d+, persistent_workers=True\): "
                         r"the file was edited since the run", proc.stdout), proc.stdout
        assert "+++ b/mnist.py" not in proc.stdout
    finally:
        mnist.script.write_text(original)
        os.utime(mnist.script, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # as recorded, for the next tests


@pytest.mark.slow
def test_apply_needs_a_proof_or_no_proof_and_keeps_the_original(mnist: Recorded) -> None:
    rule = next(r for r in mnist.rules if r.startswith("dataloader-stall"))
    before = mnist.script.read_text()
    refused = mnist.patch("--rule", rule, "--apply")
    assert refused.returncode == 1 and "not applied" in refused.stderr, refused.stderr
    assert mnist.script.read_text() == before
    try:
        done = mnist.patch("--rule", rule, "--apply", "--no-proof")
        assert done.returncode == 0, done.stderr
        assert Path(str(mnist.script) + ".orig").read_text() == before
        assert '"num_workers"' in mnist.script.read_text()
    finally:
        shutil.move(str(mnist.script) + ".orig", mnist.script)


@pytest.mark.slow
def test_nanogpt_loop_keeps_losses_without_their_graphs(tmp_path: Path) -> None:
    rec = Recorded(tmp_path, SCRIPTS / "nanogpt.py", script_args=("60",))
    rule = next(r for r in rec.rules if r in ("leak-site-graph", "graph-kept-across-steps", "tensor-leak"))
    removed, added = _changed(rec.check_applies_and_runs(rule, tmp_path, "5"))
    assert removed == ["    losses.append(loss)"] and added == ["    losses.append(loss.detach())"], (removed, added)


@pytest.fixture(scope="module")
def total_loss(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    return Recorded(tmp_path_factory.mktemp("total"), REPO / "tests" / "scripts_leaks" / "total_loss.py",
                    "--max-steps", "30")


@pytest.mark.slow
def test_total_loss_adds_a_number(total_loss: Recorded, tmp_path: Path) -> None:
    rec = total_loss
    removed, added = _changed(rec.check_applies_and_runs("graph-kept-across-steps", tmp_path, "--steps", "5"))
    assert removed == ["        total_loss += loss"] and added == ["        total_loss += loss.item()"]


@pytest.mark.slow
def test_a_growing_list_of_plain_tensors_is_bounded(tmp_path: Path) -> None:
    rec = Recorded(tmp_path, SCRIPTS / "kept_outputs_loop.py")
    rule = next(r for r in rec.rules if r in ("leak-site-container", "tensor-leak"))
    removed, added = _changed(rec.check_applies_and_runs(rule, tmp_path, "5"))
    assert removed == ["all_preds = []"], removed
    assert added == ["import collections", "all_preds = collections.deque(maxlen=100)"], added


@pytest.mark.slow
def test_a_list_grown_between_the_steps_with_graphs_keeps_detached_tensors(tmp_path: Path) -> None:
    """Validation logits appended once per epoch without torch.no_grad() (the probe's
    between-steps scan names the list; no sampled step made them): the patch was "the run
    found no line that keeps the tensors". Now the append the finding names keeps the
    tensor without its graph, and the patched script runs."""
    rec = Recorded(tmp_path, REPO / "tests" / "scripts_leaks" / "val_logits_epochs.py")
    rule = next(r for r in rec.rules if r in ("graph-list-between-steps", "tensor-leak"))
    removed, added = _changed(rec.check_applies_and_runs(rule, tmp_path))
    assert removed == ["        all_val_logits.append(logits)"], removed
    assert added == ["        all_val_logits.append(logits.detach())"], added


@pytest.mark.slow
def test_a_list_counted_at_the_end_is_not_bounded_but_said(tmp_path: Path) -> None:
    """kept_outputs.py averages over ``len(all_preds)``: a deque of the last 100 would print
    another mean, so the list is not rewritten and the use that forbids it is named."""
    rec = Recorded(tmp_path, SCRIPTS / "kept_outputs.py")
    rule = next(r for r in rec.rules if r in ("leak-site-container", "tensor-leak"))
    proc = rec.patch("--rule", rule)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"not patched: edit kept_outputs\.py by hand \(`all_preds` keeps the last 100 only.*\): "
                     r"`all_preds` .* at line 25", proc.stdout), proc.stdout
    assert not (rec.run / f"fix-{rule}.patch").exists()


@pytest.mark.slow
def test_float64_is_made_float32_where_it_is_made(tmp_path: Path) -> None:
    rec = Recorded(tmp_path, SCRIPTS / "numpy_features.py")
    removed, added = _changed(rec.check_applies_and_runs("float64-mps", tmp_path))
    assert added == ["    model = torch.nn.Linear(16, 1).float()", "        x = torch.from_numpy(features).float()"]
    assert len(removed) == 2


@pytest.mark.slow
def test_float64_stats_and_the_array_they_start_from_are_both_made_float32(tmp_path: Path) -> None:
    """float64_stats.py keeps float64 running stats: ``torch.from_numpy(np.zeros(16))`` before
    the loop, ``.double()`` in it. The patch changes both (``.double()`` alone left the stats
    float64, and a Mac raised still); profiled again, the patched script runs no float64
    op, and it finishes as the original did."""
    rec = Recorded(tmp_path, REPO / "tests" / "scripts_mac" / "float64_stats.py")
    assert "float64-mps" in rec.rules, rec.rules
    # run=False: the applied script runs below, under mpsprof (its exit status kept)
    removed, added = _changed(rec.check_applies_and_runs("float64-mps", tmp_path, run=False))
    assert added == ["feat_mean = torch.from_numpy(np.zeros(16)).float().to(device)  # float64 running stats",
                     "        feat_mean = 0.99 * feat_mean + 0.01 * w.float().mean(0)"], (removed, added)
    done = rec.patch("--rule", "float64-mps", "--apply", "--no-proof")
    assert done.returncode == 0, done.stderr
    again = mpsprof_cli("run", "--headless", "-o", str(tmp_path / "again"), str(rec.script), cwd=rec.dir)
    after, before = read_summary(tmp_path / "again"), read_summary(rec.run)
    assert after["exit"]["returncode"] == before["exit"]["returncode"] == 0, again.stderr[-2000:]
    assert not [f for f in after["findings"] if f["rule"].startswith("float64")], after["findings"]
    # the old patch's result (``.double()`` alone): the float64 ops are the update's, line 27,
    # not the float32 ``w * 100`` of line 26, which ran the same op first
    half = rec.dir / "half.py"
    half.write_text(Path(str(rec.script) + ".orig").read_text().replace("w.double()", "w.float()"))
    mpsprof_cli("run", "--headless", "-o", str(tmp_path / "half"), str(half), cwd=rec.dir)
    kept = [f for f in read_summary(tmp_path / "half")["findings"] if f["rule"] == "float64-mps"]
    assert kept and "half.py:27 (`feat_mean = 0.99" in kept[0]["evidence"], kept


@pytest.mark.slow
def test_a_kept_loss_curve_keeps_every_value_as_a_number(tmp_path: Path) -> None:
    """loss_curve.py keeps each step's detached loss in a callback's ``self.curve`` and
    prints ``len(cb.curve)``. The patch once made it a deque of the last 100 (the user's
    curve cut short, and the finding stayed); it keeps ``.item()`` numbers now: the patched
    script prints the same length, the proof finds the finding fixed, a re-run too."""
    rec = Recorded(tmp_path, SCRIPTS / "loss_curve.py")
    assert "leak-site-small" in rec.rules, rec.rules
    # run=False: the applied script runs below, under mpsprof (its exit status and output kept)
    removed, added = _changed(rec.check_applies_and_runs("leak-site-small", tmp_path, run=False))
    assert removed == ["        self.curve.append(loss)"] and added == ["        self.curve.append(loss.item())"], added
    # one pair: the verdict is the finding's presence in the original's run and absence in the
    # patched one's, with their printed losses equal (patch/prove.py, judge), no timing
    proved = rec.patch("--rule", "leak-site-small", "--prove", "--pairs", "1", "--apply")
    assert proved.returncode == 0 and "verdict     fixed" in proved.stdout, proved.stdout[-3000:] + proved.stderr
    again = mpsprof_cli("run", "--headless", "-o", str(tmp_path / "again"), str(rec.script), cwd=rec.dir)
    assert "curve 160 " in rec.proc.stdout and "curve 160 " in again.stdout, again.stdout[-2000:]
    assert "leak-site-small" not in [f["rule"] for f in read_summary(tmp_path / "again")["findings"]]


@pytest.mark.slow
def test_the_scripts_own_thread_count_is_rewritten(tmp_path: Path) -> None:
    rec = Recorded(tmp_path, REPO / "tests" / "scripts_place" / "threads_in_main.py", "--max-steps", "30")
    removed, added = _changed(rec.check_applies_and_runs("thread-oversubscription", tmp_path))
    assert removed == ["    torch.set_num_threads(16)"]
    m = re.fullmatch(r"    torch\.set_num_threads\((\d+)\)", added[0])
    assert m is not None and int(m.group(1)) >= 1


@pytest.fixture
def spawn(spawn_bootstrap_recorded: Recorded) -> Recorded:
    """examples/triggers/spawn_bootstrap.py copied and recorded once (tests/conftest.py), the
    recording test_rules_shipped.py checks the trigger's finding on."""
    return spawn_bootstrap_recorded


@pytest.mark.slow
def test_spawned_workers_get_the_main_guard(spawn: Recorded, tmp_path: Path) -> None:
    diff = spawn.check_applies_and_runs("spawn-bootstrap-crash", tmp_path)
    removed, added = _changed(diff)
    assert 'if __name__ == "__main__":' in added
    assert "    for x, y in loader:  # runs again in every worker: there is no __main__ guard" in added
    assert not any(x.startswith(("import", "from")) for x in removed)  # the imports stay at the top


@pytest.mark.slow
def test_a_memory_finding_sets_the_watermark_pair_before_torch(spawn: Recorded) -> None:
    """memory-pressure and cache-growth fire on MPS only: their finding is made here, the
    facts (the suggested ratio) and everything else come from the real recording."""
    from mpsprofiler.devices.mps_rules import HIGH, LOW, watermark_pair
    from mpsprofiler.diagnosis import diagnose
    from mpsprofiler.diagnosis.findings import Finding
    from mpsprofiler.patch.plan import plan
    from mpsprofiler.session.recording import load_runs

    session = load_runs([spawn.run]).session
    facts = diagnose(session).facts
    finding = Finding(rule="memory-pressure", severity="warning", title="t", evidence="e", fix="f")
    fix = plan(session, [finding], facts)[0]
    assert not fix.not_patched, fix.not_patched
    pair = watermark_pair(float(facts["suggested_watermark_ratio"]))
    text = fix.files[str(spawn.script.resolve())][1]
    assert f'os.environ["{HIGH}"] = "{pair[HIGH]}"' in text and f'os.environ["{LOW}"] = "{pair[LOW]}"' in text
    assert text.index("import os") < text.index(HIGH) < text.index(LOW) < text.index("\nimport torch\n")
    assert text.startswith('"""Trigger for')  # after the docstring
    compile(text, "patched.py", "exec")  # running it is the unit test's (this trigger crashes on purpose)


@pytest.mark.slow
def test_prove_of_a_crash_fix_runs_the_original_crashing_and_the_patched_one_not(spawn: Recorded) -> None:
    proc = spawn.patch("--prove", "--steps", "4")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "proven: the original crashes here with spawn-bootstrap-crash and the patched script runs" in proc.stdout
    assert "verdict     fixed" in proc.stdout, proc.stdout
    assert spawn.script.read_text() == (REPO / "examples" / "triggers" / "spawn_bootstrap.py").read_text()  # untouched


def test_the_watermark_pair_is_set_before_torch_is_imported(tmp_path: Path) -> None:
    from mpsprofiler.devices.mps_rules import HIGH, LOW, watermark_pair
    from mpsprofiler.patch.cst import set_environ_first

    script = tmp_path / "train.py"
    script.write_text(f'"""doc"""\nimport torch  # the model\n\nimport os\nprint(os.environ.get("{HIGH}"), '
                      f'os.environ.get("{LOW}"))\n')
    pair = watermark_pair(1.0)
    script.write_text(set_environ_first(script.read_text(), pair))
    text = script.read_text()
    assert text.index(HIGH) < text.index("import torch") and "import torch  # the model" in text
    ran = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=child_env(), timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == [pair[HIGH], pair[LOW]] == ["1", "0.8"]


def test_a_construct_not_at_the_line_is_refused_not_guessed() -> None:
    from mpsprofiler.patch.cst import NotFound, augassign_item, set_keywords

    source = "x = 1\nloader = make_loader(data)\n"
    with pytest.raises(NotFound, match="no DataLoader"):
        set_keywords(source, 2, ("DataLoader",), {"num_workers": "4"})
    with pytest.raises(NotFound, match="not one `x \\+= value`"):
        augassign_item(source, 1)


@pytest.mark.slow
def test_p_key_in_the_tui_shows_and_saves_the_patch(total_loss: Recorded) -> None:
    import asyncio

    from mpsprofiler.session.recording import load_runs
    from mpsprofiler.tui.app import recorded_app
    from mpsprofiler.tui.patch_key import PatchScreen

    patch = total_loss.run / "fix-graph-kept-across-steps.patch"
    patch.unlink(missing_ok=True)
    app = recorded_app(load_runs([total_loss.run]))
    app.animation_level = "none"

    async def main() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("2")
            app.query_one("FindingsPanel").select_rule("graph-kept-across-steps")  # type: ignore[attr-defined]
            await pilot.pause()
            await pilot.press("p")
            await pilot.pause()
            assert isinstance(app.screen, PatchScreen), app.screen
            assert "+        total_loss += loss.item()" in app.screen.text
            assert "--prove" in app.screen.text
            await pilot.press("escape")
            await pilot.pause()
            assert not isinstance(app.screen, PatchScreen)

    asyncio.run(main())
    assert patch.exists() and "+        total_loss += loss.item()" in patch.read_text()


def _view_shows(run: Path, headline: str) -> None:
    """``mpsprof view RUN`` opens with the stored verdict in its tried-fixes panel."""
    import asyncio

    from mpsprofiler.session.recording import load_runs
    from mpsprofiler.tui.app import recorded_app
    from mpsprofiler.tui.widgets.experiment import ExperimentPanel

    app = recorded_app(load_runs([run]))
    app.animation_level = "none"

    async def main() -> None:
        async with app.run_test(size=(140, 40)) as pilot:
            await pilot.pause()
            assert f"• {headline}" in app.query_one(ExperimentPanel).lines

    asyncio.run(main())


@pytest.mark.slow
def test_prove_shows_the_leak_gone_and_report_shows_the_verdict(total_loss: Recorded) -> None:
    """total_loss.py prints no loss while it trains (its mean comes after the last step, past
    the proof's --steps): the leak is gone, but with no loss compared that is ``gone``, not
    ``fixed``, and --apply does not take it as a proof."""
    rec = total_loss
    # one pair: the verdict is the finding's presence in the original's run and absence in the
    # patched one's (patch/prove.py, judge), no timing; each further pair only repeated both
    proc = rec.patch("--rule", "graph-kept-across-steps", "--prove", "--steps", "20", "--pairs", "1",
                     "--budget", "200")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "verdict     gone" in proc.stdout, proc.stdout + proc.stderr[-2000:]
    stored = json.loads((rec.run / "experiments.json").read_text())["experiments"][-1]
    assert stored["kind"] == "patch" and stored["patch_verdict"] == "gone"
    assert stored["headline"].startswith("finding gone; loss not compared (the script prints no loss): "
                                         "graph-kept-across-steps is gone")
    report = mpsprof_cli("report", str(rec.run), "--format", "md", cwd=rec.dir)
    assert stored["headline"] in report.stdout, report.stdout[-3000:]
    _view_shows(rec.run, stored["headline"])
    refused = rec.patch("--rule", "graph-kept-across-steps", "--apply")
    assert refused.returncode == 1 and "the proof says gone" in refused.stderr, refused.stderr
    assert "total_loss += loss\n" in rec.script.read_text()
    applied = rec.patch("--rule", "graph-kept-across-steps", "--apply", "--no-proof")
    assert applied.returncode == 0, applied.stderr
    assert "total_loss += loss.item()" in rec.script.read_text()


SPAWN = ("import multiprocessing, runpy, sys; multiprocessing.set_start_method('spawn'); "
         "runpy.run_path(sys.argv[1], run_name='__main__')")
"""Run a script the way macOS starts DataLoader workers (spawn: each re-imports it)."""


@pytest.mark.slow
def test_workers_on_macos_come_with_the_main_guard(tmp_path: Path, flat_loader_recorded: Recorded) -> None:
    """The run was on Linux (fork); the patch gives the loader workers it had none of, so it
    brings the guard there too (the same script run on macOS spawns them); the same
    recording read as a Mac's gets the same patch, and the patched script trains under
    spawn where the original would start the training again in every worker."""
    from mpsprofiler.diagnosis import diagnose
    from mpsprofiler.patch.diff import unified
    from mpsprofiler.patch.plan import plan
    from mpsprofiler.session.recording import load_runs

    rec = flat_loader_recorded  # SCRIPTS / "flat_loader.py" with --max-steps 30 (tests/conftest.py)
    rule = next(r for r in rec.rules if r.startswith("dataloader-stall"))
    linux = rec.diff(rule)
    assert '+if __name__ == "__main__":' in linux and "num_workers=" in linux  # harmless under fork, needed on macOS
    session = load_runs([rec.run]).session
    session.env["platform"] = "darwin"
    diagnosis = diagnose(session)
    fixes = plan(session, diagnosis.findings, diagnosis.facts, rule)
    mac = unified(fixes[0], str(rec.dir))
    assert '+if __name__ == "__main__":' in mac and "+    loader = DataLoader(SlowReads(), batch_size=4, num_workers=" in mac
    assert "+class SlowReads" not in mac  # the Dataset stays importable for the workers
    patched = tmp_path / "patched.py"
    patched.write_text(fixes[0].files[str(rec.script.resolve())][1])
    ran = subprocess.run([sys.executable, "-c", SPAWN, str(patched)], capture_output=True, text=True,
                         env=child_env(), timeout=180)
    assert ran.returncode == 0 and ran.stdout.count("done") == 1, ran.stderr[-3000:]


def test_patch_help_documents_every_option() -> None:
    proc = mpsprof_cli("patch", "--help", timeout=60)
    assert proc.returncode == 0, proc.stderr
    for option in ("--rule", "--prove", "--apply", "--no-proof", "--steps", "--pairs", "--budget"):
        line = next(x for x in proc.stdout.splitlines() if x.strip().startswith(option))
        assert len(line.split()) > 2, line  # its help text follows on the same line


@pytest.mark.slow
def test_a_loader_built_by_a_library_is_not_patched_but_said(library_loader_recorded: Recorded) -> None:
    lib = SCRIPTS / "lib"
    rec = library_loader_recorded  # SCRIPTS / "library_loader.py", --max-steps 30, lib on PYTHONPATH (tests/conftest.py)
    rule = next(r for r in rec.rules if r.startswith("dataloader-stall"))
    proc = rec.patch("--rule", rule)
    assert proc.returncode == 0, proc.stderr
    assert re.search(rf"not patched: edit {re.escape(str(lib / 'slowdata.py'))}:\d+ by hand \(num_workers=\d+, "
                     r"persistent_workers=True\): the file is outside the script's directory", proc.stdout), proc.stdout
    assert not (rec.run / f"fix-{rule}.patch").exists() and "+++" not in proc.stdout


# -- the review's bugs: unit tests on small sources ---------------------------------------
def _runs(text: str, **names: object) -> dict[str, object]:
    """``text`` executed as a script's ``__main__`` (with ``names`` in its globals)."""
    scope: dict[str, object] = {"__name__": "__main__", **names}
    exec(compile(text, "patched.py", "exec"), scope)
    return scope


def test_num_workers_given_by_position_is_replaced_where_it_is() -> None:
    import inspect

    from torch.utils.data import DataLoader

    from mpsprofiler.patch.cst import NotFound, set_keywords
    from mpsprofiler.patch.plan import DATALOADER_POSITIONAL, dataloader_positional

    real = tuple(p.name for p in inspect.signature(DataLoader).parameters.values()
                 if p.kind == p.POSITIONAL_OR_KEYWORD)
    assert real[:len(DATALOADER_POSITIONAL)] == DATALOADER_POSITIONAL  # the table, where torch is not imported
    assert dataloader_positional() == real  # torch imported already: its own signature
    source = "loader = DataLoader(ds,16,True,None,None,0)\n"
    text = set_keywords(source, 1, ("DataLoader",), {"num_workers": "2", "persistent_workers": "True"},
                        DATALOADER_POSITIONAL)
    assert text == "loader = DataLoader(ds,16,True,None,None,2, persistent_workers=True)\n"
    loader = _runs(text, DataLoader=DataLoader, ds=list(range(64)))["loader"]  # no TypeError
    assert loader.num_workers == 2 and loader.batch_size == 16  # type: ignore[attr-defined]
    with pytest.raises(NotFound, match=r"\*args"):
        set_keywords("loader = DataLoader(ds, *args)\n", 1, ("DataLoader",), {"num_workers": "2"}, DATALOADER_POSITIONAL)
    # keyword-only ones may go after *args
    assert "persistent_workers=True" in set_keywords("l = DataLoader(ds, *args)\n", 1, ("DataLoader",),
                                                     {"persistent_workers": "True"}, DATALOADER_POSITIONAL)


@pytest.mark.parametrize(("source", "expected"), [
    ("l = DataLoader(\n    ds,\n    batch_size=4,  # small\n)\n",
     "l = DataLoader(\n    ds,\n    batch_size=4,  # small\n    num_workers=2,\n)\n"),
    ("l = DataLoader(ds,\n               batch_size=4  # small\n)\n",
     "l = DataLoader(ds,\n               batch_size=4,  # small\n               num_workers=2\n)\n"),
    ("l = DataLoader(ds, batch_size=4,  # small\n)\n",
     "l = DataLoader(ds, batch_size=4,  # small\n    num_workers=2,\n)\n"),
    ("l = DataLoader(ds, batch_size=4)  # small\n", "l = DataLoader(ds, batch_size=4, num_workers=2)  # small\n"),
])
def test_a_comment_stays_on_the_line_of_its_argument(source: str, expected: str) -> None:
    from mpsprofiler.patch.cst import set_keywords

    text = set_keywords(source, 1, ("DataLoader",), {"num_workers": "2"})
    assert text == expected
    compile(text, "patched.py", "exec")


LOOP_CALL = """for split in ("val", "train"):
    loaders[split] = DataLoader(Rows(320 if split == "train" else 64, split == "train"), batch_size=16)  # both
"""


def test_a_one_line_call_the_change_makes_too_long_is_wrapped_one_argument_a_line() -> None:
    """The loop's conditional made the DataLoader line of tests/scripts_loader/loop_loaders.py
    186 columns long; past 100 it is wrapped as the finding's fix shows a long call (black's
    layout), and a change that keeps the line within 100 columns (a comment after the call
    not counted), or no longer than the script wrote it, keeps it."""
    from mpsprofiler.patch.cst import set_keywords

    changes = {"num_workers": '7 if split == "train" else 0', "persistent_workers": 'split == "train"'}
    text = set_keywords(LOOP_CALL, 2, ("DataLoader",), changes)
    assert text == """for split in ("val", "train"):
    loaders[split] = DataLoader(
        Rows(320 if split == "train" else 64, split == "train"),
        batch_size=16,
        num_workers=7 if split == "train" else 0,
        persistent_workers=split == "train",
    )  # both
""", text
    assert max(len(line) for line in text.splitlines()) <= 100
    loaders = _runs(text, DataLoader=lambda *a, **k: k, Rows=lambda *a: a, loaders={})["loaders"]
    assert loaders["train"]["num_workers"] == 7 and loaders["val"]["persistent_workers"] is False
    assert set_keywords("l = DataLoader(ds, batch_size=4)\n", 1, ("DataLoader",), {"num_workers": "2"}) == \
        "l = DataLoader(ds, batch_size=4, num_workers=2)\n"
    long = ("x = DataLoader(dataset_with_a_long_name, batch_size=batch_size_from_the_config_file, "
            "shuffle=True, num_workers=0)\n")
    assert set_keywords(long, 1, ("DataLoader",), {"num_workers": "4"}) == long.replace("=0)", "=4)")
    commented = "loader = DataLoader(data, batch_size=8, num_workers=2)  # persistent_workers=False: a comment longer\n"
    assert set_keywords(commented, 1, ("DataLoader",), {"persistent_workers": "True"}) == commented.replace(
        "num_workers=2)", "num_workers=2, persistent_workers=True)")


def test_a_sum_used_as_a_tensor_keeps_the_tensor_without_its_graph() -> None:
    from mpsprofiler.patch.cst import NotFound, augassign_detached

    loop = "total = 0.0\nfor x in xs:\n    loss = x * 2\n    total += loss\n"
    assert augassign_detached(loop + "print(f'{float(total) / 3:.3f}', total > 1)\n", 4)[1] == "item"
    for used in ("print(total.item())\n", "writer.add_scalar('loss', total)\n", "return_value = total\n",
                 "total.to('cpu')\n"):
        text, method = augassign_detached(loop + used, 4)
        assert method == "detach" and "    total += loss.detach()\n" in text, used
    text, method = augassign_detached("self.total += loss\n", 1)  # read anywhere: a tensor it stays
    assert text == "self.total += loss.detach()\n"
    for used in ("total.backward()\n", "torch.autograd.grad(total, params)\n"):
        with pytest.raises(NotFound, match="autograd"):
            augassign_detached(loop + used, 4)
    import torch

    xs = [torch.ones((), requires_grad=True) for _ in range(3)]
    out = _runs(augassign_detached(loop + "result = total.item()\n", 4)[0], xs=xs)
    assert out["result"] == 6.0


def test_set_num_threads_uses_the_name_torch_is_bound_to() -> None:
    from mpsprofiler.patch.cst import NotFound, insert_after_import

    call = "{name}.set_num_threads(2)"
    assert insert_after_import("import os\nimport torch as th\nx = th.ones(1)\n", "torch", call) == \
        "import os\nimport torch as th\nth.set_num_threads(2)\nx = th.ones(1)\n"
    assert "import torch.nn\ntorch.set_num_threads(2)\n" in insert_after_import("import torch.nn\n", "torch", call)
    text = insert_after_import("from torch import nn\nlayer = nn.Linear(2, 2)\n", "torch", call)
    assert text == "from torch import nn\nimport torch\ntorch.set_num_threads(2)\nlayer = nn.Linear(2, 2)\n"
    _runs(text)
    with pytest.raises(NotFound, match="for something else"):
        insert_after_import("from torch import nn\ntorch = None\n", "torch", call)


def test_the_main_guard_keeps_what_a_kept_line_reads_above_it() -> None:
    from mpsprofiler.patch.cst import NotFound, add_main_guard

    source = ("import argparse\n\np = argparse.ArgumentParser()\np.add_argument('--batch', type=int, default=4)\n"
              "args = p.parse_args([])\nBATCH = args.batch\nLR = 0.1\n\n\ndef train():\n    return BATCH * LR\n\n\n"
              "result = train()\n")
    text = add_main_guard(source)
    assert text.index("LR = 0.1") < text.index("def train") < text.index("if __name__")
    assert text.index("    args = p.parse_args([])") < text.index("    BATCH = args.batch") < text.index("    result")
    assert _runs(text)["result"] == 0.4
    # a constant rebound after top-level code that reads the first value goes under the guard too
    text = add_main_guard("lr = 0.1\nfirst = make(lr)\nlr = 0.01\nsecond = make(lr)\n")
    assert text.startswith("lr = 0.1\n") and "    lr = 0.01\n" in text
    assert _runs(text, make=lambda x: x)["first"] == 0.1
    # nanoGPT: exec() may rebind the constants above it
    assert "    tokens = batch_size * 2\n" in add_main_guard("batch_size = 4\nexec('batch_size = 8')\ntokens = batch_size * 2\n")
    with pytest.raises(NotFound, match="line 3 .*an import may need"):
        add_main_guard("import sys\nsys.path.insert(0, 'lib')\nimport mylib\nmylib.run()\n")
    with pytest.raises(NotFound, match="line 3 .*reads `model`"):
        add_main_guard("model = Net()\nmodel.train()\ndef helper(x=model):\n    return x\n")
    with pytest.raises(NotFound, match="`Rows` .*reads `args`.*spawn"):
        add_main_guard("from torch.utils.data import Dataset\nargs = parse()\n\nclass Rows(Dataset):\n"
                       "    def __getitem__(self, i):\n        return i * args.scale\n\nrun(Rows())\n")


def test_only_float64_arrays_are_made_float32() -> None:
    from mpsprofiler.patch.cst import NotFound, float32_at

    known = ("import numpy as np\nrng = np.random.default_rng(0)\nX = rng.normal(size=(4, 3))\n"
             "Y = rng.integers(0, 3, size=4)\nx = torch.from_numpy(X)\ny = torch.from_numpy(Y)\n"
             "loss = cross_entropy(model(x), y)\n")
    text, lines, _ = float32_at(known, 7)
    assert lines == [5] and "x = torch.from_numpy(X).float()\ny = torch.from_numpy(Y)\n" in text
    text, lines, _ = float32_at("def f(a):\n    x = torch.from_numpy(a).to(device)\n", 2)  # the line it names
    assert "x = torch.from_numpy(a).float().to(device)" in text
    text, _, _ = float32_at("def f(a):\n    y = torch.from_numpy(a.astype(np.int64))\n    x = torch.from_numpy(a.astype("
                            "np.float64)).to(d)\n    z = torch.from_numpy(a).long()\n", 3)
    assert "torch.from_numpy(a.astype(np.float64)).float().to(d)" in text and ".float()" not in text.split("\n")[1]
    unknown = "def f(X, Y):\n    x = torch.from_numpy(X)\n    y = torch.from_numpy(Y)\n    loss = crit(model(x), y)\n"
    for source, line in ((unknown, 4), ("def f(idx):\n    out = model(torch.from_numpy(idx))\n", 2),
                         ("def f(a, b):\n    x, y = torch.from_numpy(a), torch.from_numpy(b)\n", 2)):
        with pytest.raises(NotFound, match="cannot be told"):
            float32_at(source, line)


def test_a_float64_line_and_the_float64_tensors_it_reads_are_made_float32_together() -> None:
    """``stats = 0.99 * stats + 0.01 * w.double().mean(0)`` with ``.float()`` alone still adds
    the float64 ``stats`` of ``torch.from_numpy(np.zeros(3))`` (float64 wins the promotion):
    both lines change; another maker the fix names whose array's dtype is unknown is said."""
    from mpsprofiler.patch.cst import float32_at

    source = ("import numpy as np\nimport torch\nstats = torch.from_numpy(np.zeros(3)).to(device)\n"
              "for step in range(3):\n    w = torch.randn(4, 3)\n    stats = 0.99 * stats + 0.01 * w.double().mean(0)\n")
    text, lines, refused = float32_at(source, 6)
    assert lines == [3, 6] and refused == [], (lines, refused)
    assert "stats = torch.from_numpy(np.zeros(3)).float().to(device)\n" in text and "w.float().mean(0)" in text
    text, lines, refused = float32_at("def f(a, z):\n    x = torch.from_numpy(a)\n    y = z.double()\n", 3, [2])
    assert lines == [3] and "x = torch.from_numpy(a)\n" in text and len(refused) == 1
    assert refused[0].startswith("line 2: the dtype of `a` (line 2) cannot be told"), refused


@pytest.mark.parametrize(("use", "why"), [("torch.stack(self.curve)", "passed to torch.stack"),
                                         ("for v in cb.curve:\n    v.backward()", "is iterated"),
                                         ("last = cb.curve[-1].cpu()", "indexed or sliced")])
def test_kept_tensors_become_numbers_only_where_every_use_takes_numbers(use: str, why: str) -> None:
    from mpsprofiler.patch.cst import NotFound, added_value_number

    source = ("class Curve:\n    def __init__(self):\n        self.curve = []\n\n    def add(self, loss):\n"
              "        self.curve.append(loss)\n\ncb = Curve()\nprint(len(cb.curve), sum(cb.curve), f'{cb.curve}')\n")
    text = added_value_number(source, 6, "self.curve", "item")
    assert "        self.curve.append(loss.item())\n" in text
    with pytest.raises(NotFound, match=why):
        added_value_number(source + use + "\n", 6, "self.curve", "item")


def test_an_attribute_read_on_another_object_is_a_use_a_deque_would_change() -> None:
    """``self.curve`` read as ``cb.curve`` (``len(cb.curve)``): a deque of the last 100 would
    print another length, so the list is not bounded."""
    from mpsprofiler.patch.cst import NotFound, bounded_container

    source = ("class Curve:\n    def __init__(self):\n        self.curve = []\n\n    def add(self, loss):\n"
              "        self.curve.append(loss)\n\ncb = Curve()\nprint(len(cb.curve))\n")
    with pytest.raises(NotFound, match=r"`self.curve` is passed to len\(\) at line 9"):
        bounded_container(source, "self.curve", 100)


@pytest.mark.parametrize("use", ["preds.sort()", "preds.pop(0)", "both = preds + [1]", "m = sum(preds) / len(preds)",
                                 "last = preds[-10:]", "n = len(preds)", "torch.stack(preds)",
                                 "m = max(p for p in preds)"])
def test_a_list_becomes_a_bounded_deque_only_when_every_use_allows_it(use: str) -> None:
    from mpsprofiler.patch.cst import NotFound, bounded_container

    source = "preds = []\nfor x in xs:\n    preds.append(x)\n"
    with pytest.raises(NotFound, match="line 4"):
        bounded_container(source + use + "\n", "preds", 100)
    text, line = bounded_container(source + "for p in preds:\n    print(p)\npreds.extend([1])\npreds.clear()\n",
                                   "preds", 100)
    assert line == 1 and "preds = collections.deque(maxlen=100)" in text


def _session(script: Path, **run: object) -> object:
    import time

    from mpsprofiler.session.session import Session

    session = Session()
    session.run.update({"target": str(script), "cwd": str(script.parent), "started": time.time() + 3600, **run})
    return session


def _finding(rule: str, **facts: object) -> object:
    from mpsprofiler.diagnosis.findings import Finding

    return Finding(rule=rule, severity="warning", title=rule, evidence="e", fix="f", facts=dict(facts))


def test_persistent_workers_only_goes_to_loaders_with_workers(tmp_path: Path) -> None:
    from mpsprofiler.patch.plan import plan

    script = tmp_path / "train.py"
    script.write_text("from torch.utils.data import DataLoader\nval = DataLoader(ds, batch_size=4)\n"
                      "train = DataLoader(ds, batch_size=4, num_workers=2)\n")
    session = _session(script)
    session.dataloaders = {1: {"created": 1, "file": str(script), "line": 2, "num_workers": 0},  # type: ignore[attr-defined]
                           2: {"created": 2, "file": str(script), "line": 3, "num_workers": 2}}
    fix = plan(session, [_finding("worker-respawn")], {})[0]  # type: ignore[arg-type, list-item]
    text = fix.files[str(script.resolve())][1]
    assert "val = DataLoader(ds, batch_size=4)\n" in text
    assert "train = DataLoader(ds, batch_size=4, num_workers=2, persistent_workers=True)\n" in text
    session.dataloaders.pop(2)  # type: ignore[attr-defined]
    fix = plan(session, [_finding("worker-respawn")], {})[0]  # type: ignore[arg-type, list-item]
    assert not fix.files and "persistent_workers needs" in fix.not_patched[0]


def test_two_fixes_of_one_file_are_made_one_on_top_of_the_other(tmp_path: Path) -> None:
    from mpsprofiler.patch.command import _apply
    from mpsprofiler.patch.diff import unified
    from mpsprofiler.patch.plan import plan

    script = tmp_path / "train.py"
    original = ("import torch\n\ntotal = 0.0\nfor i in range(3):\n    total += torch.ones((), requires_grad=True) * i\n"
                "print(f'{float(total):.1f}')\n")
    script.write_text(original)
    session = _session(script)
    findings = [_finding("thread-oversubscription", suggested_torch_threads=2),
                _finding("graph-kept-across-steps", graph_carry_file=str(script), graph_carry_line=f"{script}:5")]
    threads, carry = plan(session, findings, {})  # type: ignore[arg-type]
    path = str(script.resolve())
    assert not threads.not_patched and not carry.not_patched, (threads.not_patched, carry.not_patched)
    assert carry.files[path][0] == threads.files[path][1] and carry.after == ["thread-oversubscription"]
    assert "train.py:6: add a number" in carry.changes[0]  # line 5 as recorded, 6 after the first patch
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "train.py").write_text(original)
    for fix in (threads, carry):
        patch = subprocess.run(["patch", "-p1"], input=unified(fix, str(tmp_path)), cwd=repo, capture_output=True,
                               text=True)
        assert patch.returncode == 0, patch.stdout + patch.stderr
    assert (repo / "train.py").read_text() == carry.files[path][1]
    assert "torch.set_num_threads(2)\n" in carry.files[path][1] and ".item()" in carry.files[path][1]
    originals: set[str] = set()
    run = tmp_path / "run"
    run.mkdir()
    assert _apply(carry, "c", run, None, True, False, originals) == 1  # made on top of the first: refused alone
    assert _apply(threads, "t", run, None, True, False, originals) == 0
    assert _apply(carry, "c", run, None, True, False, originals) == 0
    assert script.read_text() == carry.files[path][1] and Path(path + ".orig").read_text() == original


def test_apply_counts_the_latest_proof_of_the_same_patch(tmp_path: Path) -> None:
    from mpsprofiler.experiment.store import save_experiment
    from mpsprofiler.patch.command import _apply
    from mpsprofiler.patch.plan import Fix
    from mpsprofiler.patch.prove import digest

    script = tmp_path / "t.py"
    script.write_text("a\n")
    fix = Fix(rule="r", title="t", files={str(script): ("a\n", "b\n")})
    run = tmp_path / "run"
    run.mkdir()

    def stored(verdict: str) -> None:
        assert save_experiment(run, {"kind": "patch", "patch_sha": digest("diff"), "patch_verdict": verdict}) is None

    stored("fixed")
    assert _apply(fix, "diff", run, {"patch_verdict": "failed"}, False, True) == 1  # this --prove failed
    assert _apply(fix, "diff", run, None, False, True) == 1  # this --prove could not run
    stored("not proven")
    assert _apply(fix, "diff", run, None, False) == 1  # the older pass does not count
    assert script.read_text() == "a\n"
    stored("fixed")
    assert _apply(fix, "diff", run, None, False) == 0 and script.read_text() == "b\n"


def test_a_proofs_scratch_copy_links_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mpsprofiler.patch import prove

    root = tmp_path / "proj"
    (root / "data").mkdir(parents=True)
    outside = tmp_path / "elsewhere.bin"
    outside.write_bytes(b"x" * 1000)
    (root / "data" / "big.bin").write_bytes(b"y" * (9 << 20))  # over the old 8 MiB link limit
    (root / "data" / "linked.bin").symlink_to(outside)
    (root / "dangling").symlink_to(tmp_path / "nothing")
    (root / "up").symlink_to(root)  # a link back up is not walked again
    (root / "a").mkdir()
    (root / "b").mkdir()
    (root / "a" / "to_b").symlink_to(root / "b")
    (root / "b" / "to_a").symlink_to(root / "a")  # nor two that link to each other
    os.mkfifo(root / "fifo")  # never opened: it would wait for a writer
    dest = tmp_path / "copy"
    prove.scratch_copy(str(root), dest, None)
    for name in ("big.bin", "linked.bin"):
        copied = dest / "data" / name
        assert copied.is_file() and not copied.is_symlink()
        copied.write_bytes(b"written by a proof run")
    assert (root / "data" / "big.bin").stat().st_size == 9 << 20 and outside.read_bytes() == b"x" * 1000
    assert not (dest / "dangling").exists() and not (dest / "up" / "up").exists() and not (dest / "fifo").exists()
    assert (dest / "a" / "to_b").is_dir() and not (dest / "a" / "to_b" / "to_a" / "to_b").exists()
    monkeypatch.setattr(prove, "COPY_MAX", 1 << 20)
    with pytest.raises(prove.ProofError, match="too much to copy"):
        prove.scratch_copy(str(root), tmp_path / "copy2", None)


def _outcome(arm: str, run_dir: str | None, status: str = "finished", crash: str | None = None) -> object:
    from mpsprofiler.experiment.trial import RunOutcome

    return RunOutcome(arm=arm, pair=1, run_dir=run_dir, status=status, returncode=0, median_s=0.1, steady_steps=3,
                      steps=4, peak_rss=None, peak_device=None, wall_s=1.0, crash=crash)


def test_a_leak_proof_needs_readable_runs_and_a_loss_to_say_fixed(monkeypatch: pytest.MonkeyPatch) -> None:
    from mpsprofiler.patch import prove
    from mpsprofiler.patch.command import PROVEN

    monkeypatch.setattr(prove, "_has", lambda run_dir, key: {"a": True, "b": False}.get(run_dir or ""))
    rule = "graph-kept-across-steps"
    same = {"loss": {"equivalent": True}, "steps": 4}
    runs = [_outcome("A", "a"), _outcome("B", "b")]
    assert prove.judge(rule, same, runs)[0] == "fixed"  # type: ignore[arg-type]
    unreadable = prove.judge(rule, same, [_outcome("A", "a"), _outcome("B", None)])  # type: ignore[list-item]
    assert unreadable[0] == "not proven" and "could not be read" in unreadable[1]
    verdict, headline = prove.judge(rule, {"loss": None, "steps": 4}, runs)  # type: ignore[arg-type]
    assert verdict == "gone" and verdict not in PROVEN
    assert headline.startswith("finding gone; loss not compared (the script prints no loss)")


def test_a_crash_fix_is_proven_only_where_the_original_crashes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mpsprofiler.experiment.trial import Target, TrialConfig
    from mpsprofiler.patch import prove
    from mpsprofiler.patch.plan import Fix
    from mpsprofiler.session.session import Session

    outcomes: dict[str, object] = {}
    arms: list[str] = []

    def run_one(self: object, arm: str, pair: int, deadline: float) -> object:
        arms.append(arm)
        return outcomes[arm]

    monkeypatch.setattr(prove.PatchTrial, "_run_one", run_one)
    monkeypatch.setattr(prove, "targets", lambda *a: (Target("a.py"), Target("b.py")))
    monkeypatch.setattr(prove, "_has", lambda run_dir, key: run_dir == "a-crashed-with-it")

    def verdict(a: object) -> tuple[str, str]:
        outcomes.update(A=a, B=_outcome("B", "b"))
        arms.clear()
        result = prove.prove(Session(), str(tmp_path), Fix(rule="spawn-bootstrap-crash", title="t"), "diff",
                             tmp_path / "run", tmp_path / "out", TrialConfig(steps=4, pairs=1), lambda text: None)
        assert arms == ["A", "B"]
        return result["patch_verdict"], result["headline"]

    assert verdict(_outcome("A", "a-crashed-with-it", "crashed", "RuntimeError: bootstrapping"))[0] == "fixed"
    not_here = verdict(_outcome("A", "a"))
    assert not_here[0] == "not proven" and "runs without the crash" in not_here[1]
    other = verdict(_outcome("A", "a-other", "crashed", "KeyError: 'x'"))
    assert other[0] == "not proven" and "KeyError" in other[1]
