"""``mpsprof patch --prove``: the original and the patched script, run the way ``try`` runs.

Both sides run from scratch copies of the script's directory (the user's files are never
run patched, nor written by the proof), interleaved A B / B A by
:class:`~mpsprofiler.experiment.trial.Trial`, which measures the step time, memory and
printed loss of each. What proves a fix depends on what it fixes:

* a speed fix (workers, threads): the trial's verdict, "proven: 2.9x faster", as ``try``;
* a leak or a kept graph: the finding is gone from every patched run, was there in the
  original's, and the loss trajectory is unchanged (no loss printed: ``gone``, weaker);
* a crash: one run of each, the original crashing here with the finding's crash and the
  patched one running its steps without it (where the original does not crash, nothing
  is proven).

The result is stored with the run (``experiments.json``) so ``report`` and ``view`` show it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import time
from pathlib import Path
from typing import Any

from ..experiment.trial import OK, RunOutcome, Target, Trial, TrialConfig, Window
from ..launcher.child import RunSpec
from ..launcher.options import ProbeOptions
from ..session.session import Session
from .plan import Fix

COPY_MAX = 1 << 30
"""Bytes of the script's directory a proof copies (each side has its own copy). Nothing is
linked: a run that writes a file there (a checkpoint, a cache next to the data) must never
write the user's own, so a larger directory is not proven (said, with the way out)."""
MAX_FILES = 20000
SKIP = frozenset({".git", "__pycache__", "mpsprof-runs", ".venv", "venv", "node_modules", ".mypy_cache"})
SPEED_RULES = frozenset({"dataloader-stall", "dataloader-stall-critical", "worker-respawn", "pin-memory-mps",
                         "thread-oversubscription"})
CRASH_RULES = frozenset({"spawn-bootstrap-crash", "float64-mps-crash", "graph-carried-crash"})


class ProofError(Exception):
    """The proof cannot start (the scratch copy failed): said, never raised past the command."""


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def scratch_copy(root: str, dest: Path, skip: Path | None) -> None:
    """``root`` copied to ``dest``: every file a real copy (a symbolic link's target too, a
    linked directory walked), caches and runs left out; a link to nothing is left out (a
    write through it would create the file it names)."""
    folders, files = _listing(root, skip)
    for rel in folders:
        (dest / rel).mkdir(parents=True, exist_ok=True)
    for src, rel in files:
        shutil.copy2(src, dest / rel)


def _listing(root: str, skip: Path | None) -> tuple[list[str], list[tuple[str, str]]]:
    """The directories to make (relative to ``root``), and (path, path relative to ``root``)
    of each regular file to copy; :class:`ProofError` when they are too many or too large."""
    skip_real = os.path.realpath(skip) if skip is not None else None
    above = {root: {os.path.realpath(root)}}  # each directory walked -> the real directories it is in
    out: list[tuple[str, str]] = []
    folders: list[str] = []
    total = 0
    for here, dirs, names in os.walk(root, followlinks=True):
        folders.append(os.path.relpath(here, root))
        keep = []
        for d in dirs:
            path = os.path.join(here, d)
            real = os.path.realpath(path)
            if d in SKIP or real == skip_real or real in above[here]:
                continue  # a cache, the runs, or a link back up (a loop)
            above[path] = above[here] | {real}
            keep.append(d)
        dirs[:] = keep
        for name in names:
            src = os.path.join(here, name)
            try:
                st = os.stat(src)  # a link's target
            except OSError:
                continue  # a link to nothing
            if not stat.S_ISREG(st.st_mode):
                continue  # a FIFO or socket: reading it to copy it could wait forever
            total += st.st_size
            out.append((src, os.path.relpath(src, root)))
            if len(out) > MAX_FILES:
                raise ProofError(f"{root} holds more than {MAX_FILES} files: too many to copy for a proof")
            if total > COPY_MAX:
                raise ProofError(
                    f"{root} holds more than {COPY_MAX >> 20} MiB (data sets, checkpoints): too much to copy for a "
                    "proof, and its files are never linked into the copy instead (a proof run could write them); "
                    "keep the data outside the script's directory, or apply with --apply --no-proof")
    return folders, out


def _fix_window(session: Session, rule: str) -> Window | None:
    """The run's facts are read only for a fix that may need a window (a loader's workers)."""
    from ..diagnosis.facts import collect_facts
    from ..experiment.candidates import WINDOWED_RULES, fix_window

    return fix_window(rule, collect_facts(session)) if rule in WINDOWED_RULES else None


class TrackedTarget(Target):
    """A side whose runs keep op accounting on: a trial turns it off (less noise in the
    step time), but the leak tracking that finds a kept tensor or graph rides on it, and
    a leak's proof is that finding gone."""

    def run_spec(self, run_dir: Path | None, options: ProbeOptions, env: dict[str, str],
                 cwd: Path | None = None) -> RunSpec:
        return super().run_spec(run_dir, options.with_changes(no_ops=False), env, cwd)


class PatchTrial(Trial):
    """A trial whose B side is another script (the patched copy), not a ``--set`` change.

    Made before anything is copied or run, so whoever starts it can stop it at once: the
    TUI keeps it where ``t`` keeps its trial (``q`` stops either). :meth:`prove` makes the
    scratch copies (:func:`targets`), runs the two sides and judges."""

    def __init__(self, session: Session, root: str, fix: Fix, diff_text: str, run_dir: Path, out_dir: Path,
                 config: TrialConfig, progress: Any = None) -> None:
        # absolute: each side runs with its scratch copy as cwd, where a relative RUN_DIR
        # (`mpsprof patch mpsprof-runs/x --prove`) would name a path inside the copy
        out_dir = Path(os.path.abspath(out_dir))
        # a side loader's patch (an evaluation loader's workers) is timed over a window that
        # spans its reads, by each run's mean step, as `try` times its fix (experiment/trial.Window)
        self.window = _fix_window(session, fix.rule)
        super().__init__(Target(str(session.run.get("target") or "")), {}, out_dir, config.for_window(self.window),
                         progress, fix.rule)
        self.session, self.root, self.fix, self.diff_text, self.run_dir = session, root, fix, diff_text, run_dir
        self.sides = {"A": self.target, "B": self.target}
        self.label = f"the patch for {fix.rule}"

    def _run_one(self, arm: str, pair: int, deadline: float) -> RunOutcome | None:
        self.target = self.sides[arm]
        try:
            return super()._run_one(arm, pair, deadline)
        finally:
            self.target = self.sides["A"]

    def _scratch_cwd(self, arm: str, pair: int) -> Path | None:
        return None  # each side already runs in its own scratch copy

    def prove(self) -> dict[str, Any]:
        """Copy, run, judge: the trial's result plus ``patch_verdict``. Raises
        :class:`ProofError` when a scratch copy cannot be made."""
        fix = self.fix
        self.out_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        if self.window is not None:
            self._progress(f"  {self.window.reason}")
        started = time.monotonic()
        if not self._stop.is_set():
            original, patched = targets(self.session, self.root, fix, self.out_dir / "src", self.run_dir)
            self.sides, self.target = {"A": original, "B": patched}, original
        if fix.rule in CRASH_RULES:
            # one run of each: the original must crash here with the finding's crash for the
            # patched one's run without it to prove anything
            deadline = started + self.config.budget_s
            runs = []
            for arm in ("A", "B"):
                outcome = self._run_one(arm, 1, deadline)
                if outcome is None:
                    break
                self._progress(self._line(outcome))
                runs.append(outcome)
            self.outcomes = runs
            if self._stop.is_set():
                self.stopped = "stopped by the user"
            result = self.result(time.monotonic() - started)
        else:
            result = self.run()
        result.update(kind="patch", change=[f"patch {fix.rule}"], label=self.label, dir=str(self.out_dir),
                      patch_sha=digest(self.diff_text),
                      files=sorted(os.path.relpath(p, self.root) for p in fix.files))
        result["patch_verdict"], result["headline"] = judge(fix.rule, result, self.outcomes, fix.key)
        return result


def targets(session: Session, root: str, fix: Fix, out_dir: Path, run_dir: Path) -> tuple[Target, Target]:
    """Scratch copies of ``root`` as recorded (A) and patched (B), and the run in each."""
    from ..experiment.command import target_from_session
    from ..experiment.store import TryUsageError

    try:
        recorded = target_from_session(session)
    except TryUsageError as exc:  # a distributed job, masked arguments: said as the proof's
        raise ProofError(str(exc)) from None
    script = os.path.realpath(os.path.join(str(session.run.get("cwd") or ""), str(session.run.get("target"))))
    cwd = os.path.realpath(str(session.run.get("cwd") or root))
    sides = []
    for side, patched in (("a-original", False), ("b-patched", True)):
        dest = Path(os.path.abspath(out_dir / side))  # the side's cwd: never a path relative to ours
        try:
            scratch_copy(root, dest, run_dir)
            for path, (before, after) in fix.files.items():
                # the original is the text the patch applies to (with the patches it is made
                # on top of, :attr:`Fix.after`), the patched one that text patched
                with open(dest / os.path.relpath(path, root), "w", encoding="utf-8", newline="") as fh:
                    fh.write(after if patched else before)
        except OSError as exc:
            raise ProofError(f"cannot make the scratch copy {dest}: {exc.strerror or exc}") from None
        where = dest / os.path.relpath(cwd, root) if cwd.startswith(root + os.sep) or cwd == root else dest
        kind = Target if fix.rule in SPEED_RULES else TrackedTarget
        sides.append(kind(str(dest / os.path.relpath(script, root)), list(recorded.args), False, where,
                          dict(recorded.base), recorded.env_drift))
    return sides[0], sides[1]


def prove(session: Session, root: str, fix: Fix, diff_text: str, run_dir: Path, out_dir: Path,
          config: TrialConfig, progress: Any) -> dict[str, Any]:
    """Run the proof and return its result (the trial's, plus ``patch_verdict``)."""
    return PatchTrial(session, root, fix, diff_text, run_dir, out_dir, config, progress).prove()


def store(run_dir: Path, result: dict[str, Any]) -> list[str]:
    """The result kept beside its runs and in the run's ``experiments.json`` (where
    ``report`` and ``view`` read it): the CLI and the TUI store it the same way. Returns
    what could not be written (said by the caller, never fatal)."""
    from ..experiment.store import save_experiment, save_result

    errors = [save_result(Path(str(result["dir"])), result), save_experiment(run_dir, result)]
    return [e for e in errors if e]


def _has(run_dir: str | None, key: str) -> bool | None:
    """Whether the finding (or one of its cause) is in the run's diagnosis; None: unreadable."""
    if not run_dir:
        return None
    try:
        from ..diagnosis import diagnose
        from ..session.recording import load_runs

        found = diagnose(load_runs([Path(run_dir)]).session).findings
    except Exception:  # noqa: BLE001 - an unreadable run proves nothing either way
        return None
    return any(f.key == key for f in found)


def judge(rule: str, result: dict[str, Any], outcomes: list[RunOutcome], key: str | None = None) -> tuple[str, str]:
    """(``fixed`` | ``faster`` | ``gone`` | ``not proven`` | ``failed``, the headline reports
    show). ``gone``: the finding is gone but the loss was not compared (the script prints
    none), weaker than ``fixed``: ``--apply`` does not take it as a proof."""
    b_runs = [o for o in outcomes if o.arm == "B"]
    a_runs = [o for o in outcomes if o.arm == "A"]
    bad = next((o for o in b_runs if o.status not in OK), None)
    if bad is not None:
        return "failed", f"patch not proven: the patched script failed ({bad.crash or bad.status})"
    if not b_runs:  # stopped (the user, the budget) before a patched run finished: no failure
        return "not proven", f"patch not proven: {result.get('stopped') or 'no patched run finished'}"
    if rule in SPEED_RULES:
        verdict = str(result.get("verdict"))
        loss = result.get("loss") or {}
        if verdict == "faster" and loss.get("equivalent") is False:
            return "not proven", f"patch changes the loss: {result.get('headline')}"
        # the trial's hint to run more pairs names `try`; a patch is proven again with --prove
        said = str(result.get("headline")).replace("(mpsprof try --pairs", "(mpsprof patch --prove --pairs")
        return ("faster" if verdict == "faster" else "not proven"), f"patch {said}"
    gone_b = [_has(o.run_dir, key or rule) for o in b_runs]
    if any(g is None for g in gone_b):
        return "not proven", "patch not proven: a patched run could not be read back to look for the finding"
    if any(gone_b):
        return "not proven", f"patch not proven: the patched script still shows {rule}"
    if rule in CRASH_RULES:
        return _judge_crash(rule, a_runs, b_runs, key)
    shown_a = [_has(o.run_dir, key or rule) for o in a_runs]
    loss = result.get("loss")
    if not any(shown_a):
        unread = " (a run of it could not be read back)" if any(g is None for g in shown_a) else ""
        return "not proven", (f"patch not proven: the original's {result.get('steps')}-step runs do not show "
                              f"{rule} either{unread} (more --steps)")
    if isinstance(loss, dict) and not loss.get("equivalent"):
        return "not proven", f"patch not proven: {rule} is gone but the loss DIFFERS"
    runs = f"{len(b_runs)} patched run{'s' if len(b_runs) != 1 else ''}"
    if not isinstance(loss, dict):
        return "gone", (f"finding gone; loss not compared (the script prints no loss): {rule} is gone in {runs} "
                        "and found in the original's, but nothing shows the training unchanged")
    return "fixed", f"proven: {rule} is gone in {runs} and found in the original's; loss equivalent"


def _judge_crash(rule: str, a_runs: list[RunOutcome], b_runs: list[RunOutcome], key: str | None) -> tuple[str, str]:
    """A crash fix is proven where the original crashes here with the finding's crash and the
    patched script, run the same way, does not."""
    if not a_runs:
        return "not proven", "patch not proven: the original's run did not finish in the time budget"
    a = a_runs[0]
    if a.status in OK:
        return "not proven", (f"patch not proven here: the original runs without the crash on this machine "
                              f"({rule} was recorded elsewhere); prove it where it crashes")
    shown = _has(a.run_dir, key or rule)
    if shown is None:
        return "not proven", "patch not proven: the original's run could not be read back to look for the crash"
    if not shown:
        return "not proven", (f"patch not proven here: the original failed, but not with {rule} "
                              f"({a.crash or a.status})")
    return "fixed", (f"proven: the original crashes here with {rule} and the patched script runs "
                     f"{b_runs[0].steps} steps without it")
