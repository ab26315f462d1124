"""``mpsprof try SCRIPT [ARGS]`` and ``mpsprof try RUN_DIR``: prove a fix on the user's script.

With a script, the change is ``--set`` (required). With a run directory, every finding
of that run whose fix mpsprof can apply (see :mod:`.candidates`) is tried in turn, or
only ``--set`` when given; the results are stored in the run directory, where ``view``
and ``report`` show them.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import textwrap
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..rundir import is_run_dir
from ..settings import HELP, SettingError, parse_settings
from ..units import fmt_bytes, plural
from .store import TryUsageError as TryUsageError  # re-exported: the TUI catches it
from .store import folder_label
from .trial import Target, Trial, TrialConfig, Window, fmt_x

if TYPE_CHECKING:
    from ..session.session import Session

EXIT_INTERRUPTED = 130


def add_try_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = textwrap.fill("Run the script as written (A) and with a change (B), interleaved A B / B A, each cut "
                          "after the same steps, and report the speedup of the steady step time with a 95% interval. "
                          "TARGET is a script (then --set is the change) or a run directory (then each finding's "
                          "fix that needs no code edit is tried, or --set). Where options go: with a script, "
                          "before it (everything after the script is the script's, as with python); with a run "
                          "directory, anywhere.", width=78)
    parser.epilog = ("examples:\n  mpsprof try mpsprof-runs/<run> --steps 20 --pairs 3 --budget 120\n"
                     "  mpsprof try --set dataloader.num_workers=4 --steps 20 train.py --epochs 1")
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--set", dest="settings", action="append", default=[], metavar="NAME=VALUE", help=HELP)
    parser.add_argument("--steps", type=int, default=30, metavar="N", help="steps per run (default 30)")
    parser.add_argument("--pairs", type=int, default=5, metavar="N", help="A/B pairs (default 5)")
    parser.add_argument("--budget", type=float, default=300.0, metavar="SECONDS",
                        help="total time budget of the whole experiment: no pair starts that would not finish "
                             "in it, and a run still going at its end is stopped (default 300)")
    parser.add_argument("--cwd", type=Path, metavar="DIR",
                        help="a scratch directory for the files the script writes: each run gets its own fresh "
                             "directory under DIR (A and B never share one)")
    parser.add_argument("-o", "--output", type=Path, metavar="DIR",
                        help="where the experiment's runs go (default: RUN_DIR/experiments/ or ./mpsprof-runs/)")
    parser.add_argument("-m", dest="module", metavar="MODULE", help="run a library module (like python -m)")
    parser.add_argument("target", nargs="?", metavar="TARGET", help="a training script or a run directory")
    parser.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS",
                        help="arguments for the script (a run directory takes none: options after it are mpsprof's)")


def main_try(args: argparse.Namespace) -> int:
    from ..errors import UsageError

    try:
        plans, owner = _plans(args)
    except (TryUsageError, SettingError) as exc:
        raise UsageError(str(exc)) from None
    config = TrialConfig(steps=args.steps, pairs=args.pairs, budget_s=args.budget)
    target = plans[0][0]
    where = target.cwd or Path.cwd()
    say(f"mpsprof try: {target.command()}  (in {where})")
    if target.env_drift:
        say(f"  caution: {target.env_drift}")
    say(f"  {len(plans)} change{'s' if len(plans) != 1 else ''} to try, {config.pairs} pairs of runs each, "
        f"{config.steps} steps per run, at most {config.budget_s:.0f} s in all. Each run is your script as it is: "
        "files it writes go where it writes them (use --cwd DIR for a scratch directory); mpsprof writes only "
        "the experiment's directory. Ctrl-C stops cleanly.")
    if args.cwd is not None:
        say(f"  each run works in its own fresh directory under {args.cwd}")
    started = time.monotonic()
    results: list[dict[str, Any]] = []
    interrupted = False
    for n, (target, change, rule, out_dir, window, loader) in enumerate(plans):
        left = config.budget_s - (time.monotonic() - started)
        if left <= 0 or interrupted:
            if not interrupted:
                say(f"\nmpsprof try: the time budget of {config.budget_s:.0f} s is used up; "
                    f"{len(plans) - n} change{'s' if len(plans) - n != 1 else ''} not tried")
            break
        trial_config = TrialConfig(config.steps, config.pairs, left, total_s=config.budget_s).for_window(window)
        trial = Trial(target, change, out_dir, trial_config, progress=say, rule=rule, loader=loader)
        say(f"\ntrying {trial.label}" + (f" (fix of {rule})" if rule else "") + f": runs in {out_dir}")
        if window is not None:
            say(f"  {window.reason}")
        previous = _on_sigint(trial)
        try:
            result = trial.run()
        finally:
            _restore_sigint(previous)
        interrupted = trial.stopped == "stopped by the user"
        result["dir"] = str(out_dir)
        results.append(result)
        from .store import save_result

        error = save_result(out_dir, result)
        if error:
            say(f"mpsprof: {error}")
        if owner is not None:
            from .store import save_experiment

            error = save_experiment(owner, result)
            if error:
                say(f"mpsprof: {error}")
    sys.stdout.write("".join(render_result(r) for r in results))
    if owner is not None and results:
        sys.stdout.write(f"\nstored in {owner}: `mpsprof report {owner}` shows it with the findings\n")
    sys.stdout.flush()
    return EXIT_INTERRUPTED if interrupted else 0


def say(text: str) -> None:
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except OSError:
        pass


def _on_sigint(trial: Trial) -> Any:
    def handler(signum: int, frame: Any) -> None:
        say("\nmpsprof try: stopping (the run in progress is ended; finished pairs are kept)")
        trial.stop()

    try:
        return signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread
        return None


def _restore_sigint(previous: Any) -> None:
    if previous is not None:
        signal.signal(signal.SIGINT, previous)


Plan = tuple[Target, dict[str, Any], str | None, Path, Window | None, str | None]
"""What to run, the ``--set`` change to try, the finding's rule (if a fix), where, the
window a fix that shows in a few steps only needs (candidates.Candidate.window), and the
loader it changes as the finding names it (candidates.Candidate.loader)."""


def _plans(args: argparse.Namespace) -> tuple[list[Plan], Path | None]:
    if args.steps < 2 or args.pairs < 2 or not args.budget > 0:
        raise TryUsageError("--steps and --pairs must be at least 2 and --budget more than 0")
    if args.cwd is not None and not args.cwd.is_dir():
        raise TryUsageError(f"--cwd {args.cwd}: no such directory")
    if args.output is not None and args.output.exists() and any(args.output.iterdir()):
        raise TryUsageError(f"-o {args.output}: the directory is not empty (an experiment never mixes with other runs)")
    change = parse_settings(list(args.settings))
    script_args = list(args.args or [])
    if script_args[:1] == ["--"]:
        script_args = script_args[1:]
    if args.module:
        if args.target is not None:
            script_args = [args.target, *script_args]
        return _script_plans(Target(args.module, script_args, True, args.cwd, scratch=args.cwd is not None), change, args)
    if args.target is None:
        raise TryUsageError("try needs a script (mpsprof try --set ... train.py) or a run directory")
    path = Path(args.target)
    if is_run_dir(path):
        return _run_dir_plans(path, change, args)
    if not path.exists():
        raise TryUsageError(f"no such script or run directory: {args.target}")
    target = os.path.abspath(path) if args.cwd is not None else str(path)
    return _script_plans(Target(target, script_args, False, args.cwd, scratch=args.cwd is not None), change, args)


def _script_plans(target: Target, change: dict[str, Any], args: argparse.Namespace) -> tuple[list[Plan], Path | None]:
    if not change:
        raise TryUsageError("with a script, say what to try: --set NAME=VALUE (or pass a run directory to try "
                            "its findings' fixes)")
    from ..rundir import default_run_dir

    out = args.output or default_run_dir("try-" + Path(target.target).stem)
    return [(target, change, None, out, None, None)], None


def _run_dir_plans(run_dir: Path, change: dict[str, Any], args: argparse.Namespace
                   ) -> tuple[list[Plan], Path | None]:
    from ..session.recording import load_runs
    from .candidates import candidates
    from .store import experiment_dir

    loaded = load_runs([run_dir])
    target = target_from_session(loaded.session, args.cwd)
    if change:
        todo: list[tuple[dict[str, Any], str | None, Window | None, str | None]] = [(change, None, None, None)]
    else:
        from ..diagnosis import diagnose

        diagnosis = diagnose(loaded.session)
        found = candidates(diagnosis.findings, diagnosis.facts)
        if not found:
            raise TryUsageError(f"no finding of {run_dir} has a fix mpsprof can apply without editing the script; "
                                "say what to try with --set NAME=VALUE")
        todo = [(c.settings, c.rule, c.window, c.loader) for c in found]
    plans: list[Plan] = []
    for settings, rule, window, loader in todo:
        # the folder is named as the change is titled (the TUI's ``try`` names its folders so),
        # the loader by the name the finding gives it, not its construction number: a
        # Trainer's read "2.num_workers=4" where the user reads "num_workers=4 (the
        # Trainer's training DataLoader)". Nothing reads the name back: old folders open.
        label = folder_label(settings, loader)
        out = args.output / label if args.output else experiment_dir(run_dir, label)
        plans.append((target, settings, rule, out, window, loader))
    return plans, run_dir


def target_from_session(session: Session, cwd: Path | None = None) -> Target:
    """The recorded run's script, arguments, directory and ``--set`` (raises TryUsageError).

    Its runs happen in the recorded run's directory, as the recorded one did (the script
    path may be relative to it); ``cwd`` (``try --cwd DIR``) gives each run a fresh
    directory under DIR instead, with the script's path made absolute."""
    run = session.run
    if not run.get("target"):
        raise TryUsageError("the recording does not say which script ran")
    if run.get("ranks") or session.is_distributed:
        raise TryUsageError("try does not run distributed jobs yet")
    argv = [str(a) for a in run.get("argv") or [run["target"]]]
    if any("***" in a for a in argv[1:]):
        raise TryUsageError("the recorded command line has masked secret values (***); run "
                            "`mpsprof try --set NAME=VALUE SCRIPT ARGS` with the real arguments instead")
    target_path = str(run["target"])
    if cwd is not None and not run.get("module") and run.get("cwd"):
        target_path = os.path.join(str(run["cwd"]), target_path)
    where = cwd or (Path(run["cwd"]) if run.get("cwd") else None)
    base = parse_settings([str(s) for s in run.get("settings") or []])
    return Target(target_path, argv[1:], bool(run.get("module")), where, base, environment_drift(session),
                  scratch=cwd is not None)


def environment_drift(session: Session) -> str | None:
    """How this process's environment differs from the recorded run's, in a sentence; None
    when it does not, or the recording kept no digests (made before they were kept)."""
    from ..launcher.env_digest import drift, drift_words

    recorded = session.run.get("env_digest")
    if not isinstance(recorded, dict):
        return None
    return drift_words(drift({str(k): str(v) for k, v in recorded.items()}, os.environ))


def render_result(r: dict[str, Any]) -> str:
    """The plain-text result of one experiment (stdout of ``mpsprof try``)."""
    lines = ["", f"── mpsprof try: {r.get('label')}" + (f" (fix of {r['rule']})" if r.get("rule") else "") + " ──",
             str(r.get("headline"))]
    a, b = r.get("a_median_s") or [], r.get("b_median_s") or []
    if a and b:
        from .stats import median

        am, bm = median(a), median(b)
        if am is not None and bm is not None:  # runs without a steady step have no median
            mean = r.get("figure") == "mean"
            what = ("mean" if len(a) == 1 else "means") if mean else ("median" if len(a) == 1 else "medians")
            lines.append(f"  step time   as written {am * 1000:.1f} ms   with the change {bm * 1000:.1f} ms   "
                         f"({what} of {plural(len(a), 'run')} x {plural(r.get('steps'), 'step')}"
                         + (", the evaluation steps included)" if mean else ")"))
    mem = r.get("memory") or {}
    for key, name in (("peak_rss", "peak RSS"), ("peak_device", "device peak")):
        x, y = mem.get(f"a_{key}"), mem.get(f"b_{key}")
        if x and y:
            lines.append(f"  memory      {name} {fmt_bytes(x)} -> {fmt_bytes(y)} (x{fmt_x(y / x)})")
    loss = r.get("loss")
    if loss:
        if loss.get("equivalent"):
            lines.append(f"  loss        equivalent: {loss['values']} printed value{'' if loss['values'] == 1 else 's'}, largest difference "
                         f"{loss['max_relative_difference']:.1%}")
        else:
            lines.append(f"  loss        DIFFERS: largest difference {loss['max_relative_difference']:.1%} "
                         f"(as written ends at {loss.get('a_last'):.4g}, with the change {loss.get('b_last'):.4g})")
    else:
        lines.append("  loss        not compared (no printed loss values found in the output of both sides, "
                     "e.g. 'loss: 0.53', 'loss=0.53', 'train_loss 0.53')")
    if r.get("stopped"):
        lines.append(f"  stopped     {r['stopped']}")
    if r.get("env_drift"):
        lines.append(f"  caution     {r['env_drift']}")
    lines.append(f"  runs        {r.get('dir')}  ({r.get('seconds')} s)")
    return "\n".join(lines) + "\n"
