"""``mpsprof patch RUN_DIR``: each finding's fix as a diff of the user's own files.

Without options it only writes ``RUN_DIR/fix-<rule>.patch`` and prints it (the user's
files are not touched). ``--prove`` runs the original and the patched script from scratch
copies, interleaved as ``try`` does, and stores the verdict with the run. ``--apply``
writes the patch into the files, after a proof (this one, or else the latest stored for the
same patch) or with ``--no-proof``, keeping each original as ``FILE.orig``. Two findings'
fixes of one file are made one on top of the other: their patches apply in order.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..experiment.command import say

if TYPE_CHECKING:  # the CLI builds every subcommand's parser: libcst loads only for `patch`
    from ..experiment.trial import TrialConfig
    from .edits import Fix

PROVEN = ("faster", "fixed")
PROVE_STEPS, PROVE_PAIRS, PROVE_BUDGET_S = 30, 3, 300.0
"""--prove's defaults, the TUI's proof's too: three pairs are the fewest whose t interval
(t = 4.30) proves a clear speedup; more cost minutes of the user's machine."""


def add_patch_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = textwrap.fill(
        "Write each finding's fix into a unified diff of your own files (RUN_DIR/fix-<rule>.patch, printed "
        "too), at the line the finding names: DataLoader arguments, the __main__ guard spawned workers need, "
        "the script's thread count, `+= loss` -> `+= loss.item()`, a growing list bounded, float64 made "
        "float32, the MPS watermark pair before `import torch`. Your files are changed only with --apply.",
        width=78)
    parser.epilog = ("examples:\n  mpsprof patch mpsprof-runs/<run>\n  mpsprof patch mpsprof-runs/<run> --prove\n"
                     "  cd <script dir> && git apply /path/to/run/fix-dataloader-stall.patch")
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run directory written by `mpsprof run`")
    parser.add_argument("--rule", metavar="RULE", help="only the finding of this rule")
    parser.add_argument("--prove", action="store_true",
                        help="run the original and the patched script (scratch copies) interleaved, as `try` does, "
                             "and store the verdict with the run")
    parser.add_argument("--apply", action="store_true",
                        help="write the patch into your files (FILE.orig keeps each original); needs a proof "
                             "(--prove now, else the latest one stored for this patch) unless --no-proof")
    parser.add_argument("--no-proof", action="store_true", help="with --apply: apply without a proof")
    parser.add_argument("--steps", type=int, default=PROVE_STEPS, metavar="N",
                        help=f"--prove: steps per run (default {PROVE_STEPS})")
    parser.add_argument("--pairs", type=int, default=PROVE_PAIRS, metavar="N",
                        help=f"--prove: A/B pairs (default {PROVE_PAIRS})")
    parser.add_argument("--budget", type=float, default=PROVE_BUDGET_S, metavar="SECONDS",
                        help=f"--prove: time budget of each patch's proof (default {PROVE_BUDGET_S:.0f})")


def main_patch(args: argparse.Namespace) -> int:
    from ..diagnosis import diagnose
    from ..events import SchemaError
    from ..session.recording import RecordingError, load_runs
    from .diff import describe, write_patch
    from .plan import main_script, plan
    from .unplanned import NOT_PATCHED_SUFFIX, planner_line, record

    if args.no_proof and not args.apply:
        raise UsageError("--no-proof goes with --apply")
    if args.steps < 2 or args.pairs < 1 or not args.budget > 0:
        raise UsageError("--steps must be at least 2, --pairs at least 1 and --budget more than 0")
    try:
        loaded = load_runs([args.run_dir])
    except (RecordingError, SchemaError) as exc:
        raise UsageError(str(exc)) from None
    run_dir = loaded.run_dir or args.run_dir
    session = loaded.session
    script = main_script(session)
    if script is None:
        raise UsageError("the recording does not name the script it ran (a module run, -m, is not patched yet)")
    root = os.path.dirname(script)
    diagnosis = diagnose(session)
    fixes = plan(session, diagnosis.findings, diagnosis.facts, args.rule)
    if not fixes:
        which = f"no {args.rule} finding" if args.rule else "no finding"
        sys.stdout.write(f"mpsprof patch: {run_dir} has {which}; nothing to patch\n")
        return 0
    out = sys.stdout
    status = 0
    seen: dict[str, str] = {}
    originals: set[str] = set()  # files whose FILE.orig this command wrote (a later fix keeps it)
    by_hand: list[str] = []  # one line per finding that gets no patch, said after the patches
    for fix in fixes:
        if not fix.planned:
            by_hand.append(_by_hand(run_dir, fix.rule, fix.not_patched[0]))
            continue
        text, path, error = write_patch(run_dir, fix, root)
        if text and text in seen:  # two findings of one cause (a leak and its line): one patch
            out.write(f"\n── {fix.rule}: {fix.title} ──\n  the same patch as for {seen[text]} "
                      f"({path or error})\n")
            record(run_dir, fix.rule, None)
            continue
        seen[text] = fix.rule
        out.write("\n" + describe(fix, text, path, error, root))
        out.flush()
        if not text:
            if fix.not_patched:
                by_hand.append(_by_hand(run_dir, fix.rule, planner_line(fix.rule, fix.not_patched)))
            continue
        record(run_dir, fix.rule, None)  # a record of an earlier "not patched" is stale now
        result = _prove(session, root, fix, text, run_dir, args) if args.prove else None
        if args.apply:
            status = max(status, _apply(fix, text, run_dir, result, args.no_proof, args.prove, originals))
    if by_hand:
        out.write("\n" + "".join(line + "\n" for line in by_hand))
        kept = os.path.join(str(run_dir), f"fix-<rule>{NOT_PATCHED_SUFFIX}")
        out.write(f"  (each line is kept in {kept})\n")
        out.flush()
    return status


def _by_hand(run_dir: Path, rule: str, line: str) -> str:
    """``line``, recorded in the run directory (a write that fails is said, not fatal)."""
    from .unplanned import record

    error = record(run_dir, rule, line)
    if error:
        say(f"mpsprof: {error}")
    return line


def _prove(session: Any, root: str, fix: Fix, text: str, run_dir: Path, args: argparse.Namespace
           ) -> dict[str, Any] | None:
    from ..experiment.command import render_result
    from ..experiment.store import TryUsageError, experiment_dir
    from .prove import ProofError, prove, store

    try:
        out_dir = experiment_dir(run_dir, f"patch-{fix.rule}")
    except TryUsageError as exc:
        say(f"mpsprof patch: cannot prove: {exc}")
        return None
    say(f"\nproving the patch for {fix.rule}: original and patched scratch copies in {out_dir}")
    try:
        result = prove(session, root, fix, text, run_dir, out_dir, proof_config(args.steps, args.pairs, args.budget),
                       say)
    except ProofError as exc:
        say(f"mpsprof patch: cannot prove: {exc}")
        return None
    for error in store(run_dir, result):
        say(f"mpsprof: {error}")
    sys.stdout.write(render_result(result))
    sys.stdout.write(f"  verdict     {result['patch_verdict']}: stored in {run_dir} (`mpsprof report` shows it)\n")
    sys.stdout.flush()
    return result


def proof_config(steps: int, pairs: int, budget_s: float) -> TrialConfig:
    """``--prove``'s trial (the TUI's proof too): a verdict from as few pairs as asked, up to 3."""
    from ..experiment.trial import TrialConfig

    return TrialConfig(steps=steps, pairs=pairs, budget_s=budget_s, min_pairs=min(3, pairs))


def stored_proof(run_dir: Path, text: str) -> dict[str, Any] | None:
    """The latest proof stored for exactly this patch (same diff), whatever its verdict: an
    older pass does not outweigh a newer failure."""
    from ..experiment.store import load_experiments
    from .prove import digest

    sha = digest(text)
    for item in reversed(load_experiments(run_dir)):
        if item.get("kind") == "patch" and item.get("patch_sha") == sha:
            return dict(item)
    return None


def _apply(fix: Fix, text: str, run_dir: Path, result: dict[str, Any] | None, no_proof: bool,
           proving: bool = False, originals: set[str] | None = None) -> int:
    """Write ``fix`` into the files. The proof that counts is this command's (``--prove``),
    else the latest stored for this patch; ``originals``: the files whose ``FILE.orig``
    this command wrote already (a fix made on top of another keeps that first original)."""
    originals = set() if originals is None else originals
    proof = result if result is not None or proving else stored_proof(run_dir, text)
    verdict = proof.get("patch_verdict") if proof is not None else None
    if verdict not in PROVEN and not no_proof:
        why = (f"the proof says {verdict}" if proof is not None else
               "the proof could not run" if proving else "no proof of this patch is stored")
        say(f"mpsprof patch: not applied ({fix.rule}): {why}. Prove it (--prove), or apply it anyway with "
            "--apply --no-proof")
        return 1
    for path, (before, _) in fix.files.items():
        try:
            with open(path, encoding="utf-8", newline="") as fh:
                if fh.read() != before:
                    on_top = f" (this patch is made on top of the one for {', '.join(fix.after)}: apply that first)" \
                        if fix.after else ""
                    say(f"mpsprof patch: not applied ({fix.rule}): {path} is not the text the patch was made "
                        f"for{on_top}")
                    return 1
        except OSError as exc:
            say(f"mpsprof patch: not applied: {path}: {exc.strerror or exc}")
            return 1
    for path in fix.files:
        if path not in originals and os.path.lexists(path + ".orig"):
            say(f"mpsprof patch: not applied: {path}.orig exists (an earlier original); move it away first")
            return 1
    for path, (before, after) in fix.files.items():
        orig = path + ".orig"
        if path not in originals:
            with open(orig, "x", encoding="utf-8", newline="") as fh:
                fh.write(before)
            originals.add(path)
        with open(path, "w", encoding="utf-8", newline="") as fh:
            fh.write(after)
        say(f"mpsprof patch: applied to {path} (the original is {orig})")
    return 0
