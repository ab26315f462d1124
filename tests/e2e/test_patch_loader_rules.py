"""``mpsprof patch`` for the loader rules the other patch tests leave. ``worker-respawn``
(workers started again at every epoch) end to end through the CLI on the rule's own
trigger script: the patch keeps that loader's workers (``persistent_workers=True`` on the
line that builds it), applies with ``git apply``, and the patched script, profiled again,
no longer gets the finding. ``pin-memory-mps`` (Mac only) through the planner. The other
loader rules' patches have their own tests (test_patch.py, test_patch_prove_e2e.py,
test_patch_unplanned.py)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_patch import Recorded, _changed
from tests.helpers import REPO, child_env, line_of, mpsprof_cli

TRIGGER = REPO / "examples" / "triggers" / "worker_respawn.py"


@pytest.mark.slow
@pytest.mark.serial  # the finding is judged from the workers' start-up share of the epochs
def test_respawned_workers_are_kept_and_the_finding_goes(tmp_path: Path, worker_respawn_recorded: Recorded) -> None:
    rec = worker_respawn_recorded  # TRIGGER copied and recorded once (tests/conftest.py), shared with test_rules_shipped.py
    assert "worker-respawn" in rec.rules, rec.rules
    # the finding's fix is the script's own line (its dataset's name, its arguments), as the patch
    # writes it, not a generic `DataLoader(dataset, ...)` naming a variable the script lacks
    finding = next(f for f in json.loads((rec.run / "summary.json").read_text())["findings"]
                   if f["rule"] == "worker-respawn")
    assert f"{TRIGGER.name}:{line_of(TRIGGER, 'loader = DataLoader(')}" in finding["fix"], finding["fix"]
    assert "loader = DataLoader(data, batch_size=8, num_workers=2, persistent_workers=True)" in finding["fix"], \
        finding["fix"]
    # the patched script runs once, profiled (below): its exit status and "done" are python's
    removed, added = _changed(rec.check_applies_and_runs("worker-respawn", tmp_path, run=False))
    built = "    loader = DataLoader(data, batch_size=8, num_workers=2)  # persistent_workers=False"
    assert removed == [built], removed
    assert added == ["    loader = DataLoader(data, batch_size=8, num_workers=2, persistent_workers=True)"
                     "  # persistent_workers=False"], added
    patched = tmp_path / "repo-worker-respawn"  # check_applies_and_runs applied it there
    run = tmp_path / "patched-run"
    proc = mpsprof_cli("run", "--headless", "-o", str(run), str(patched / TRIGGER.name), cwd=patched,
                       env=child_env(MKL_NUM_THREADS="1"))
    assert proc.returncode == 0 and "done" in proc.stdout, proc.stderr[-3000:]
    rules = [f["rule"] for f in json.loads((run / "summary.json").read_text())["findings"]]
    assert "worker-respawn" not in rules, rules
    assert shutil.which("git") and subprocess.run(["git", "diff", "--quiet", "--no-index", str(TRIGGER),
                                                   str(rec.script)]).returncode == 0  # the user's file untouched


def test_pinned_memory_on_a_mac_is_switched_off_on_the_loader_that_asks_for_it(tmp_path: Path) -> None:
    """``pin-memory-mps`` fires only on MPS (no Mac here): the planner on a session as a Mac
    run records it. The fix is the rule's own (pin_memory=False, torch's DataLoader does not
    pin for MPS); the other loader and the other arguments stay as written."""
    from mpsprofiler.patch.plan import plan
    from tests.e2e.test_patch import _finding, _session

    script = tmp_path / "train.py"
    script.write_text("from torch.utils.data import DataLoader\n"
                      "train = DataLoader(ds, batch_size=4, num_workers=2, pin_memory=True)  # fast copies\n"
                      "val = DataLoader(ds, batch_size=4)\n")
    session = _session(script)
    session.dataloaders = {1: {"created": 1, "file": str(script), "line": 2, "num_workers": 2,  # type: ignore[attr-defined]
                               "pin_memory": True, "persistent_workers": False}}
    fix = plan(session, [_finding("pin-memory-mps")], {})[0]  # type: ignore[arg-type, list-item]
    assert not fix.not_patched, fix.not_patched
    text = fix.files[str(script.resolve())][1]
    assert text.splitlines()[1:] == ["train = DataLoader(ds, batch_size=4, num_workers=2, pin_memory=False)  # fast copies",
                                     "val = DataLoader(ds, batch_size=4)"], text


@pytest.mark.slow
def test_workers_taken_from_a_command_line_option_are_set_as_its_default(tmp_path: Path) -> None:
    """``num_workers=args.workers``: the patch wrote ``num_workers=8`` over it, and
    ``--workers`` silently did nothing. Now the option's default changes, and
    ``persistent_workers`` follows the option (``--workers 0`` must still run: torch refuses
    persistent workers without workers)."""
    import sys

    from mpsprofiler.diagnosis import diagnose
    from mpsprofiler.session.recording import load_run

    script = tmp_path / "option_workers.py"
    shutil.copy(REPO / "tests" / "scripts_patch" / "option_workers.py", script)
    run_dir = tmp_path / "run"
    proc = mpsprof_cli("run", "--headless", "-o", str(run_dir), str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    facts = diagnose(load_run(run_dir).session).facts
    n = facts["suggested_num_workers"]
    assert isinstance(n, int) and n > 0, n
    # the finding's own code agrees with the patch: the line keeps the option, and says how to run
    code = str(facts["loader_code"])
    assert "num_workers=args.workers" in code and "persistent_workers=args.workers > 0" in code, code
    assert f"# and run it with --workers {n},\n# or make {n} that option's default (option_workers.py:24)" in code, code
    proc = mpsprof_cli("patch", "--apply", "--no-proof", str(run_dir), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"--workers defaults to {n} (num_workers=args.workers)" in proc.stdout, proc.stdout
    text = script.read_text()
    assert f'parser.add_argument("--workers", type=int, default={n}, help=' in text, text
    assert _passes("num_workers=args.workers", "persistent_workers=args.workers > 0", text), text
    assert 'if __name__ == "__main__":' in text, text  # --workers N spawns them on macOS: the guard comes too
    for option in ([], ["--workers", "0"]):
        ran = subprocess.run([sys.executable, str(script), "--steps", "3", *option], capture_output=True, text=True,
                             env=child_env(), timeout=120)
        assert ran.returncode == 0 and f"with {option[1] if option else n} workers" in ran.stdout, ran.stderr[-2000:]


def _passes(*args_and_text: str) -> bool:
    """Whether ``text`` (the last) passes the arguments in turn as the call's last ones, on
    one line or one a line (a call the change takes past 100 columns is wrapped:
    patch/cst/calls.py)."""
    *args, text = args_and_text
    flat = ", ".join(args) + ")"
    wrapped = re.compile(r",\n\s+".join(re.escape(a) for a in args) + r",\n\s*\)")
    return flat in text or wrapped.search(text) is not None


def _profile_and_patch(tmp_path: Path, name: str) -> tuple[Path, dict[str, Any], str]:
    """``name`` from tests/scripts_patch copied, profiled and patched in place (no proof run):
    (the script, the diagnosis' facts, the patch's output)."""
    from mpsprofiler.diagnosis import diagnose
    from mpsprofiler.session.recording import load_run

    script = tmp_path / name
    shutil.copy(REPO / "tests" / "scripts_patch" / name, script)
    run_dir = tmp_path / "run"
    proc = mpsprof_cli("run", "--headless", "-o", str(run_dir), str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    facts = diagnose(load_run(run_dir).session).facts
    proc = mpsprof_cli("patch", "--apply", "--no-proof", str(run_dir), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return script, facts, proc.stdout


def _runs(script: Path, *args: str) -> str:
    import sys

    ran = subprocess.run([sys.executable, str(script), "--steps", "3", *args], capture_output=True, text=True,
                         env=child_env(), timeout=120)
    assert ran.returncode == 0, ran.stderr[-2000:]
    return ran.stdout


@pytest.mark.slow
def test_workers_taken_from_the_modules_hparams_are_left_and_set_where_it_is_built(tmp_path: Path) -> None:
    """``num_workers=self.hparams.num_workers`` (Lightning's hyperparameters): the patch wrote
    ``num_workers=8`` over it, and the module's setting silently did nothing. Now the line
    keeps it (``persistent_workers`` follows it) and the patch and the finding say to build
    the module with the number, or to make it the default of its ``__init__``."""
    script, facts, out = _profile_and_patch(tmp_path, "hparams_workers.py")
    n = facts["suggested_num_workers"]
    assert isinstance(n, int) and n > 0, n
    code = str(facts["loader_code"])
    assert "num_workers=self.hparams.num_workers" in code and f"num_workers={n}," not in code, code
    init = line_of(script, "def __init__(self, num_workers")
    assert (f"# and build the module with num_workers={n} (the line reads self.hparams.num_workers,\n"
            f"# the module's hyperparameters),\n# or make {n} the default of its __init__'s num_workers "
            f"(hparams_workers.py:{init})") in code, code
    built = line_of(script, "return DataLoader(")
    assert (f"not patched: num_workers={n} at hparams_workers.py:{built}: the line keeps "
            f"num_workers=self.hparams.num_workers and needs no change there; build the module with num_workers={n} "
            ) in out, out
    text = script.read_text()
    assert _passes("num_workers=self.hparams.num_workers", "persistent_workers=self.hparams.num_workers > 0", text), text
    assert f"num_workers={n}" not in text, text
    assert "trained with 0 workers" in _runs(script)


@pytest.mark.slow
def test_an_option_two_loaders_read_is_left_at_both_and_run_with_changes_both(tmp_path: Path) -> None:
    """``--workers`` read by the train and the validation loader, the train one slow: a number
    written over the train loader's ``args.workers`` left the option driving the validation
    loader alone, and a new default would change both. Both lines keep it; the patch and the
    finding say to run with ``--workers N`` and that the validation loader gets N too."""
    script, facts, out = _profile_and_patch(tmp_path, "two_loaders_option.py")
    n = facts["suggested_num_workers"]
    assert isinstance(n, int) and n > 0, n
    # the lines as recorded (the patch applied in place puts the training under the main guard)
    original = REPO / "tests" / "scripts_patch" / "two_loaders_option.py"
    train, val = line_of(original, "train = DataLoader("), line_of(original, "val = DataLoader(")
    said = (f"run it with --workers {n} (the call at two_loaders_option.py:{val} reads --workers too:"
            f"{{}}it gets {n} as well; give this loader its own option to keep them apart)")
    assert "# and " + said.format("\n# ") in str(facts["loader_code"]), facts["loader_code"]
    assert (f"not patched: num_workers={n} at two_loaders_option.py:{train}: the line keeps num_workers=args.workers "
            f"and needs no change there; {said.format(' ')}") in out, out
    text = script.read_text()
    assert _passes("num_workers=args.workers", "persistent_workers=args.workers > 0", text), text
    assert 'if __name__ == "__main__":' in text, text  # --workers N spawns them on macOS: the guard comes too
    assert "val = DataLoader(Reads(0.0), batch_size=64, num_workers=args.workers)" in text, text
    assert 'parser.add_argument("--workers", type=int, default=0)' in text, text  # both loaders' default, as written
    assert "trained with 2 workers" in _runs(script, "--workers", "2")
