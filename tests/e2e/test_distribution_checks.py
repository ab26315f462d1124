"""torch.distributions' argument checks (``validate_args``, on by default) are reads a
Mac GPU waits for: the sync finding's fix is the script's own distribution call with
``validate_args=False`` added (its arguments as written, ``logits=`` too, the class as the
script names it), and ``mpsprof patch`` makes that edit. Until session 56 the fix said
``Categorical(probs, validate_args=False)`` whatever the script's call was.
"""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import pytest
import torch.distributions

from helpers import Recorded, child_env, fix_code, line_of, mpsprof_cli, read_events, read_summary
from mpsprofiler.diagnosis.analyzers.source_edit import rewrite_call
from mpsprofiler.diagnosis.analyzers.sync_fix import checks_on, distribution_classes
from mpsprofiler.patch import cst

MAC = Path(__file__).resolve().parent.parent / "scripts_mac"


def test_the_classes_read_from_torch_are_its_distributions_and_each_takes_validate_args() -> None:
    """The names come from the installed torch's torch/distributions/__init__.py (not
    imported); every one is a Distribution whose constructor takes ``validate_args``."""
    names = distribution_classes()
    assert "Categorical" in names and "Normal" in names and "kl_divergence" not in names
    for name in names:
        cls = getattr(torch.distributions, name)
        assert issubclass(cls, torch.distributions.Distribution), name
        assert "validate_args" in inspect.signature(cls).parameters, name


def test_the_call_that_checks_is_the_one_rewritten_in_the_fix_and_in_the_patch() -> None:
    """policy_gradient.py builds ``Categorical(probs, validate_args=False) if ... else
    Categorical(probs)``: the fix and the patch turn off the checks of the second call, the
    one that makes them, and leave the first as written."""
    script = MAC / "policy_gradient.py"
    line = line_of(script, "m = Categorical(probs")
    rewrite = rewrite_call(str(script), line, distribution_classes(), {"validate_args": "False"}, keep=checks_on)
    assert rewrite is not None
    tree = ast.parse(rewrite.after)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "Categorical"]
    assert len(calls) == 2 and all([k.arg for k in c.keywords] == ["validate_args"] for c in calls), rewrite.after
    source = script.read_text()

    def lacks(call: object) -> bool:
        return not any(a.keyword is not None and a.keyword.value == "validate_args" for a in call.args)  # type: ignore[attr-defined]

    patched = cst.set_keywords(source, line, distribution_classes(), {"validate_args": "False"}, keep=lacks)
    new = patched.splitlines()[line - 1:]
    assert new[0].startswith("        m = Categorical(probs, validate_args=False) if args.no_validate else Categorical(")
    assert source.count("validate_args=False") + 1 == patched.count("validate_args=False")


@pytest.mark.slow
def test_the_fix_is_the_scripts_own_call_and_the_patch_keeps_the_output_with_fewer_reads(tmp_path: Path) -> None:
    """actor_critic.py: ``torch.distributions.Categorical(logits=out[:, :4])`` four times a
    step (4 checks when built, 4 in ``log_prob``). The fix shows that statement with
    ``validate_args=False`` and the patch makes that edit: it applies with git, the patched
    script prints the same loss, and profiled again it makes none of those reads."""
    script = MAC / "actor_critic.py"
    rec = Recorded(tmp_path, script)
    assert rec.proc.returncode == 0, rec.proc.stderr[-3000:]
    found = [f for f in read_summary(rec.run)["findings"] if f["rule"] == "sync-heavy-mac"]
    assert len(found) == 1, rec.rules
    line = line_of(script, "policy = torch.distributions.Categorical(")
    written = script.read_text().splitlines()[line - 1].strip()
    assert fix_code(found[0]).strip() == written.removesuffix(")") + ", validate_args=False)", found[0]["fix"]
    assert "Categorical(probs" not in found[0]["fix"]  # no example that is not the script's
    assert "torch/distributions/distribution.py" in found[0]["fix"]  # set_default_validate_args's source

    text = rec.check_applies_and_runs("sync-heavy-mac", tmp_path, run=False)
    assert f"+{' ' * 8}{written.removesuffix(')')}, validate_args=False)" in text, text
    repo = tmp_path / "repo-sync-heavy-mac"
    before = subprocess.run([sys.executable, script.name], cwd=rec.dir, capture_output=True, text=True,
                            env=child_env(), timeout=120)
    after = subprocess.run([sys.executable, script.name], cwd=repo, capture_output=True, text=True,
                           env=child_env(), timeout=120)
    assert before.returncode == after.returncode == 0, after.stderr[-2000:]
    assert after.stdout == before.stdout and "final loss" in after.stdout
    again = mpsprof_cli("run", "--headless", "-o", str(tmp_path / "again"), script.name, cwd=repo, env=child_env())
    assert again.returncode == 0, again.stderr[-3000:]
    rows = [s for e in read_events(tmp_path / "again") if e.get("k") == "ops" for s in e.get("syncs") or []]
    assert [e for e in read_events(tmp_path / "again") if e.get("k") == "ops"]  # sampled steps looked for reads
    assert not [s for s in rows if "distributions" in str(s.get("via") or "")], rows
    assert "sync-heavy-mac" not in again.stderr
