"""``mpsprof``: argument parsing and wiring only; the work lives in the layers below."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from . import __version__
from .errors import UsageError

if TYPE_CHECKING:
    from .diagnosis.findings import Finding
    from .launcher.child import RunSpec
    from .launcher.distributed import TorchrunPlan
    from .launcher.options import ProbeOptions
    from .results import Results
    from .session.recording import LoadedRun
    from .session.session import Session

EXIT_USAGE = 2
EXIT_FINDINGS = 3
"""``--fail-on``: a finding reached the given severity, or a ``--rules`` file did not load
(the script itself succeeded)."""

DESCRIPTION = """\
Profile and troubleshoot PyTorch training on Apple silicon (MPS), CUDA and CPU.

  mpsprof run train.py --epochs 3          live TUI around the unchanged script
  mpsprof run --headless train.py          no TUI (automatic when stdout is not a terminal)
  mpsprof run -m mypkg.train -- --lr 1e-3  module form
  mpsprof view mpsprof-runs/<run>          reopen a recorded run
  mpsprof report mpsprof-runs/<run> --format html
  mpsprof run --set dataloader.num_workers=4 --max-steps 50 train.py   a change, no edit
  mpsprof try mpsprof-runs/<run>           prove a finding's fix: A/B runs, speedup and interval
  mpsprof patch mpsprof-runs/<run>         the fix as a diff of your code (--prove, --apply)
  mpsprof compare RUN_A RUN_B              two runs side by side, with ratios
  mpsprof doctor                           is this machine set up right for MPS/CUDA?
  mpsprof bench                            CPU vs accelerator timings
  mpsprof rules                            list the diagnosis rules
  mpsprof demo                             profile a bundled example with a real problem
"""


TORCHRUN_FLAGS = ("nnodes", "node-rank", "master-addr", "master-port", "rdzv-backend", "rdzv-endpoint",
                  "rdzv-id", "max-restarts")
"""torchrun options mpsprof passes through (``--nnodes 2 --node-rank 0 ...``)."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; given the ``command`` being run, the other subcommands keep their
    names and summaries (``mpsprof --help``, an unknown command's suggestions) but do not
    import their modules to declare their options: every ``mpsprof run`` paid ~70 ms for
    ``try``, ``patch``, ``compare``, ``doctor``, ``bench`` and ``rules``. ``""`` (no command:
    ``mpsprof``, ``mpsprof --help``, ``--version``) declares none of them, ``run``'s and ``report``'s
    included: the top-level help shows only their summaries, and ``try``'s options alone
    imported the whole diagnosis."""

    def wanted(name: str) -> bool:
        return command is None or command == name

    def options(name: str, module: str, function: str, sub_parser: argparse.ArgumentParser) -> None:
        if wanted(name):
            _optional_arguments(module, function, sub_parser)

    parser = argparse.ArgumentParser(
        prog="mpsprof", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"mpsprof {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="run a training script under the profiler",
        description="Run SCRIPT (or -m MODULE) exactly as `python SCRIPT ARGS` would, with the profiler watching. "
        "Options for mpsprof go before the script; everything after it goes to the script.",
    )
    if wanted("run"):
        add_run_options(run)
    run.add_argument("-m", dest="module", metavar="MODULE", help="run a library module as a script (like python -m)")
    run.add_argument("target", nargs="?", metavar="SCRIPT", help="the training script")
    run.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS", help="arguments for the script")

    demo = _command(sub, "demo", "profile a bundled example training with a slow DataLoader",
                    "Run a small bundled image classifier whose DataLoader is too slow, under the profiler: "
                    "the findings name the stall and the fix (num_workers).")
    if wanted("demo"):
        add_run_options(demo, distributed=False)
    demo.add_argument("--steps", type=int, default=None, help="training steps of the demo (default: its own)")

    view = _command(sub, "view", "open a recorded run in the TUI",
                    "Reopen a run directory written by `mpsprof run` in the TUI, with the same panels and findings.")
    view.add_argument("run_dir", type=Path, nargs="+", metavar="RUN_DIR",
                      help="a run directory (several: the nodes of one job), or a directory holding runs "
                      "(its mpsprof-runs/): the newest opens")
    view.add_argument("--rules", action="append", type=Path, default=[], metavar="DIR", help="add your rule files")

    report = _command(sub, "report", "write a report of a recorded run",
                      "Write a report of a recorded run: Markdown, a self-contained HTML page, the JSON summary "
                      "or a Chrome/Perfetto trace.")
    report.add_argument("run_dir", type=Path, nargs="+", metavar="RUN_DIR", help="a run directory (several: the nodes of one job)")
    if wanted("report"):
        from . import report as report_formats

        report.add_argument("--format", "-f", choices=report_formats.FORMATS, default=report_formats.DEFAULT_FORMAT,
                            help=report_formats.format_help())
    report.add_argument("-o", "--output", type=Path, help="file to write (default: standard output)")
    report.add_argument("--rules", action="append", type=Path, default=[], metavar="DIR", help="add your rule files")
    report.add_argument("--absolute-paths", action="store_true",
                        help="keep paths as recorded (default: relative to the working directory, ~ for home)")

    try_ = _command(sub, "try", "prove a fix: A/B runs of the script as written and with a change",
                    "Run the script as written and with a change, interleaved, and report the measured speedup.")
    options("try", "mpsprofiler.experiment.command", "add_try_arguments", try_)
    patch = _command(sub, "patch", "write a finding's fix into your code as a diff (--prove, --apply)",
                     "Write each finding's fix as a unified diff of your own files.")
    options("patch", "mpsprofiler.patch.command", "add_patch_arguments", patch)
    compare = _command(sub, "compare", "two runs side by side, with ratios (TUI, text, md, html)",
                       "Show the figures of two recorded runs side by side with the ratio B / A.")
    options("compare", "mpsprofiler.compare", "add_compare_arguments", compare)
    doctor = _command(sub, "doctor", "check this machine for training on MPS or CUDA",
                      "Check this machine for training on MPS or CUDA (the Python build, torch, the accelerator), "
                      "each problem with its fix.")
    bench = _command(sub, "bench", "time CPU against the accelerator (matmul, small training steps)",
                     "Time the CPU against the accelerator (matmul, small training steps), with warm-up and "
                     "synchronisation, so the figures mean what they say.")
    rules = _command(sub, "rules", "list the diagnosis rules, or `rules check FILE` to validate one",
                     "List the diagnosis rules (the built-in ones and yours, --rules DIR), or validate rule "
                     "files with `mpsprof rules check FILE`.")
    options("doctor", "mpsprofiler.doctor", "add_doctor_arguments", doctor)
    options("bench", "mpsprofiler.bench", "add_bench_arguments", bench)
    options("rules", "mpsprofiler.rules_cli", "add_rules_arguments", rules)
    return parser


def _command(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, summary: str,
             description: str) -> argparse.ArgumentParser:
    """A subcommand with its one-line summary in ``mpsprof --help`` and a sentence in its own help."""
    return sub.add_parser(name, help=summary, description=description)


def _optional_arguments(module: str, function: str, parser: argparse.ArgumentParser) -> None:
    """Let a subcommand's module declare its own options (it owns them, not the CLI)."""
    import importlib

    try:
        getattr(importlib.import_module(module), function)(parser)
    except (ImportError, AttributeError) as exc:  # a broken install: say so when used
        parser.set_defaults(_broken=f"{module} cannot be loaded ({exc})")


def add_run_options(parser: argparse.ArgumentParser, distributed: bool = True) -> None:
    from .launcher.options import DEFAULT_OPS_BUDGET

    parser.add_argument("--headless", action="store_true", help="no TUI; print a summary at the end")
    parser.add_argument("-o", "--output", type=Path, metavar="DIR", help="run directory (default: ./mpsprof-runs/<time>-<script>)")
    parser.add_argument("--rules", action="append", type=Path, default=[], metavar="DIR", help="add your rule files (repeatable)")
    parser.add_argument("--report", type=Path, metavar="FILE", help="also write a report (.md, .html, .json or .trace.json)")
    parser.add_argument(
        "--fail-on", choices=["warning", "critical"], help=f"exit with status {EXIT_FINDINGS} when a finding reaches this severity (or a --rules file does not load)"
    )
    parser.add_argument("--no-ops", action="store_true", help="switch off op accounting (CPU fallback / sync detection)")
    parser.add_argument("--ops-budget", type=float, default=DEFAULT_OPS_BUDGET, metavar="SHARE", help=f"time budget of op accounting, a share of the training time (default {DEFAULT_OPS_BUDGET:g} = {DEFAULT_OPS_BUDGET * 100:g}%%; it spends a tenth of that once the ops per step stop changing)")
    add_experiment_options(parser)
    if not distributed:  # the demo is one process
        parser.set_defaults(nproc_per_node=None, standalone=False,
                            **{"tr_" + flag.replace("-", "_"): None for flag in TORCHRUN_FLAGS})
        return
    dist = parser.add_argument_group(
        "distributed (through torch.distributed.run; `mpsprof run -- torchrun ... SCRIPT` works too)"
    )
    dist.add_argument("--nproc-per-node", metavar="N", help="ranks on this node: launch the script with torchrun")
    for flag in TORCHRUN_FLAGS:
        dist.add_argument(f"--{flag}", dest="tr_" + flag.replace("-", "_"), metavar="VALUE", help=argparse.SUPPRESS)
    dist.add_argument("--standalone", action="store_true", help="single-node rendezvous (default with --nproc-per-node)")


def add_experiment_options(parser: argparse.ArgumentParser, with_set: bool = True) -> None:
    """``--set`` / ``--max-steps`` / ``--max-seconds`` / ``--cwd`` (also used by ``mpsprof try``)."""
    from .settings import HELP

    group = parser.add_argument_group("changes and limits (no edit of the script; see `mpsprof try`)")
    if with_set:
        group.add_argument("--set", dest="settings", action="append", default=[], metavar="NAME=VALUE", help=HELP)
    group.add_argument("--max-steps", type=int, metavar="N",
                       help="end the run cleanly after N steps (exit status 0, the summary says 'cut')")
    group.add_argument("--max-seconds", type=float, metavar="S",
                       help="end the run cleanly at the first step boundary after S seconds of training")
    group.add_argument("--cwd", type=Path, metavar="DIR",
                       help="run the script in DIR (a scratch directory for the files the script writes)")


def experiment_options(args: argparse.Namespace) -> tuple[ProbeOptions, dict[str, str]]:
    """The probe options and environment for ``--set`` / limits; raises UsageError."""
    from .launcher.options import ProbeOptions
    from .settings import SettingError, parse_settings

    try:
        settings = parse_settings(list(getattr(args, "settings", None) or []))
    except SettingError as exc:
        raise UsageError(str(exc)) from None
    if args.max_steps is not None and args.max_steps < 1:
        raise UsageError("--max-steps must be at least 1")
    if args.max_seconds is not None and not args.max_seconds > 0:
        raise UsageError("--max-seconds must be more than 0")
    if args.cwd is not None and not args.cwd.is_dir():
        raise UsageError(f"--cwd {args.cwd}: no such directory")
    options = ProbeOptions(settings=settings or {}, max_steps=args.max_steps, max_seconds=args.max_seconds)
    return options, dict(settings.get("env") or {})


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_command_word(argv))
    args = _parse(parser, argv)
    if getattr(args, "_broken", None):
        parser.exit(1, f"mpsprof: internal error: {args._broken}\n")
    try:
        if args.command in ("run", "demo"):
            return _cmd_run(args)
        if args.command == "view":
            return _cmd_view(args)
        if args.command == "report":
            return _cmd_report(args)
        if args.command == "compare":
            from .compare import main_compare

            return main_compare(args)
        if args.command == "try":
            from .experiment.command import main_try

            return main_try(args)
        if args.command == "patch":
            from .patch.command import main_patch

            return main_patch(args)
        if args.command == "doctor":
            from .doctor import main_doctor

            return main_doctor(args)
        if args.command == "bench":
            from .bench import main_bench

            return main_bench(args)
        if args.command == "rules":
            from .rules_cli import main_rules

            return main_rules(args)
    except UsageError as exc:
        parser.exit(EXIT_USAGE, f"mpsprof: error: {exc}\n")
    except KeyboardInterrupt:
        return 130
    parser.print_help()
    return 0


def _command_word(argv: list[str]) -> str:
    """The command being run: the first word that is no option (mpsprof's own options,
    ``-h`` and ``--version``, take no value), ``""`` when there is none."""
    return next((word for word in argv if not word.startswith("-")), "")


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """argparse for mpsprof's own options; the script and every argument after it are
    the script's, verbatim (argparse would eat a ``--`` among them)."""
    from .cli_args import PYTHON_NAME, check_command, mpsprof_options_after_script, parse_try

    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    check_command(parser, list(subparsers.choices), argv)
    if argv[:1] == ["try"]:
        return parse_try(parser, subparsers.choices["try"], argv)
    if argv[:1] != ["run"]:
        return parser.parse_args(argv)
    own, script = split_run_argv(subparsers.choices["run"], argv[1:])
    args = parser.parse_args(["run", *own])
    if args.module:
        args.target, args.args = None, script
    else:
        args.target, args.args = (script[0] if script else None), script[1:]
        shown, shown_args = args.target, args.args
        if shown is not None and PYTHON_NAME.fullmatch(Path(shown).name) and shown_args[:1] and shown_args[0] != "-m":
            shown, shown_args = shown_args[0], shown_args[1:]  # mpsprof run python train.py --headless
        args.note = mpsprof_options_after_script(subparsers.choices["run"], "run", shown, shown_args)
    return args


def split_run_argv(run_parser: argparse.ArgumentParser, tokens: list[str]) -> tuple[list[str], list[str]]:
    """(mpsprof's options, the script and its arguments). As with ``python``, the first
    word that is not an option is the script and everything after it is the script's;
    a ``--`` before the script (or right after ``-m MODULE``) ends mpsprof's options."""
    options = run_parser._option_string_actions
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == "--":
            return tokens[:i], tokens[i + 1 :]
        if not token.startswith("-") or token == "-":
            return tokens[:i], tokens[i:]
        name = token.split("=", 1)[0]
        action = options.get(name)
        inline = "=" in token
        if action is None and not token.startswith("--") and len(token) > 2:
            action, inline = options.get(token[:2]), True  # -oDIR, -mpkg.mod
        if action is not None and action.dest == "module":
            end = i + 1 if inline else i + 2
            rest = tokens[end:]
            return tokens[:end], rest[1:] if rest[:1] == ["--"] else rest
        takes_value = action is not None and action.nargs != 0 and not inline
        i += 2 if takes_value else 1
    return tokens, []


# -- run ----------------------------------------------------------------------
def _run_spec(args: argparse.Namespace) -> RunSpec:
    from .launcher.child import RunSpec
    from .rundir import RunDirInUse, default_run_dir, prepare_run_dir

    if args.command == "demo":
        from .resources import demo_script

        target, module = str(demo_script()), False
        script_args = [] if args.steps is None else ["--steps", str(args.steps)]
    else:
        script_args = list(args.args or [])  # verbatim: see split_run_argv
        if args.module:
            if args.target is not None:
                script_args = [args.target, *script_args]
            target, module = args.module, True
        elif args.target is None:
            raise UsageError("run needs a script to run (mpsprof run train.py ...) or -m MODULE")
        else:
            target, module = args.target, False
            from .cli_args import PythonPrefixError, python_prefix

            try:
                named = python_prefix(target, script_args)  # mpsprof run python train.py
            except PythonPrefixError as exc:
                raise UsageError(str(exc)) from None
            if named is not None:
                target, module, script_args = named
            if not module and not _is_torchrun(target, module):
                _check_launcher(target, script_args)
                _check_script(target)
    if getattr(args, "report", None) is not None:
        from .report import format_for_path

        try:
            format_for_path(args.report)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    if args.ops_budget <= 0 or args.ops_budget > 0.5:
        raise UsageError("--ops-budget must be a share between 0 and 0.5 (e.g. 0.005 for 0.5%)")
    plan = _torchrun_plan(args, target, module, script_args)
    if plan is not None:
        target, module, script_args = plan.script, plan.module, plan.script_args
    experiment, env = experiment_options(args)
    from .launcher.options import ProbeOptions

    if plan is not None and (experiment != ProbeOptions() or args.cwd is not None):
        raise UsageError("--set, --max-steps, --max-seconds and --cwd are not supported for distributed runs yet")
    if args.cwd is not None and not module:
        target = os.path.abspath(target)
    run_dir = args.output if args.output is not None else default_run_dir(target.split(".")[-1] if module else target)
    try:
        prepared, error = prepare_run_dir(Path(run_dir), unique=args.output is None)
    except RunDirInUse as exc:  # never mix two runs in one directory
        raise UsageError(str(exc)) from None
    if error:
        sys.stderr.write(f"mpsprof: {error}; the run goes on without a recording\n")
    options = experiment.with_changes(no_ops=bool(args.no_ops), ops_budget=args.ops_budget)
    return RunSpec(target=target, args=script_args, module=module, run_dir=prepared, options=options, torchrun=plan,
                   env=env, cwd=args.cwd)


def _is_torchrun(target: str, module: bool) -> bool:
    """``-- torchrun ...`` or ``-m torch.distributed.run ...``: the user's own launch line."""
    return (not module and Path(target).name == "torchrun") or (module and target == "torch.distributed.run")


def _torchrun_plan(args: argparse.Namespace, target: str, module: bool, script_args: list[str]) -> TorchrunPlan | None:
    """A distributed launch: ``--nproc-per-node``, ``-- torchrun ...`` or ``-m torch.distributed.run``."""
    from .launcher.distributed import DistributedUsageError, plan_from_options, plan_from_torchrun_argv

    try:
        if _is_torchrun(target, module):
            plan = plan_from_torchrun_argv(script_args)
            if not plan.module:
                _check_script(plan.script)
            return plan
        nproc = getattr(args, "nproc_per_node", None)
        if nproc is None:
            return None
        extra: list[str] = []
        for flag in TORCHRUN_FLAGS:
            value = getattr(args, "tr_" + flag.replace("-", "_"), None)
            if value is not None:
                extra += [f"--{flag}", str(value)]
        if args.standalone:
            extra.append("--standalone")
        return plan_from_options(nproc, extra, target, module, script_args)
    except DistributedUsageError as exc:
        raise UsageError(str(exc)) from None


ACCELERATE_LAUNCH = (
    "`accelerate launch` runs the script in a process of its own (accelerate/commands/launch.py: "
    "`simple_launcher`), which mpsprof does not enter. For one process, run the script itself: "
    "`mpsprof run {script} ...`. The launcher hands the script the settings of `accelerate config` as "
    "environment variables (ACCELERATE_MIXED_PRECISION, ACCELERATE_USE_CPU, ...: accelerate/utils/launch.py, "
    "`prepare_simple_launcher_cmd_env`); `Accelerator()` reads those, not the config file, so set the ones "
    "you use before mpsprof (`ACCELERATE_MIXED_PRECISION=bf16 mpsprof run {script} ...`) or pass them to "
    "`Accelerator(...)`. For several processes: `mpsprof run --nproc-per-node N {script} ...` (accelerate's "
    "multi-process launch is torch.distributed.run)."
)


def _check_launcher(target: str, script_args: list[str]) -> None:
    """``mpsprof run accelerate launch train.py``: a launcher, not a script. Said before the
    missing-file error ("no such script: accelerate"), with the command that profiles it."""
    name = Path(target).name
    launch = (name == "accelerate" and script_args[:1] == ["launch"]) or name == "accelerate-launch"
    if launch and not Path(target).is_file():
        script = next((a for a in script_args if a.endswith(".py")), "train.py")
        raise UsageError(ACCELERATE_LAUNCH.format(script=script))


def _check_script(target: str) -> None:
    path = Path(target)
    if not path.exists():
        raise UsageError(f"no such script: {target}")
    if path.is_dir() and not (path / "__main__.py").exists():
        raise UsageError(f"{target} is a directory, not a script (and has no __main__.py)")
    if not path.is_dir() and not os.access(path, os.R_OK):
        raise UsageError(f"cannot read {target}: permission denied")


def _use_tui(args: argparse.Namespace) -> bool:
    if args.headless:
        return False
    from .launcher.foreground import tui_possible

    return tui_possible()


def _cmd_run(args: argparse.Namespace) -> int:
    spec = _run_spec(args)
    if _use_tui(args):
        from .tui.app import run_tui

        code, session, finished = run_tui(spec, list(args.rules))
    else:
        from .launcher.headless import run_headless

        code, session, finished = run_headless(spec, list(args.rules))
    from .report.console import print_summary

    results = finished.results
    print_summary(results, str(finished.summary_dir) if finished.summary_dir else None)
    if getattr(args, "note", ""):  # after the summary: the script's stderr stays python's
        sys.stderr.write(args.note)
    if args.report is not None:
        _write_report_file(session, results, args.report)
    if code < 0:
        _die_by_signal(-code)
    if code == 0 and args.fail_on and _reaches(results.findings, args.fail_on):
        sys.stderr.write(f"mpsprof: a finding reached '{args.fail_on}' (--fail-on): exit status {EXIT_FINDINGS}\n")
        return EXIT_FINDINGS
    unchecked = [e for e in results.rule_errors if getattr(e, "level", None) == "error"]
    if code == 0 and args.fail_on and unchecked:
        from .units import plural

        # a CI gate whose own rule did not load passed green: the rule never ran (the
        # problems are named above; a failed diagnosis, mpsprof's fault, fails no gate)
        sys.stderr.write(f"mpsprof: {plural(len(unchecked), 'rule file problem')} (named above): the gate "
                         f"(--fail-on) did not check the rules they hold: exit status {EXIT_FINDINGS}\n")
        return EXIT_FINDINGS
    return code


def _reaches(findings: list[Finding], level: str) -> bool:
    from .diagnosis.findings import severity_rank

    return any(severity_rank(f.severity) >= severity_rank(level) for f in findings)


def _die_by_signal(signum: int) -> None:
    """Exit the way the script did: killed by the same signal."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        signal.signal(signum, signal.SIG_DFL)
    except (OSError, ValueError):
        pass  # SIGKILL/SIGSTOP cannot be caught: already default
    try:
        os.kill(os.getpid(), signum)
    except OSError:
        pass
    sys.exit(128 + signum)


# -- view / report --------------------------------------------------------------
def _load(paths: list[Path]) -> LoadedRun:
    from .events import SchemaError
    from .session.recording import RecordingError, load_runs

    try:
        loaded = load_runs(list(paths))
    except (RecordingError, SchemaError) as exc:
        raise UsageError(str(exc)) from None
    if loaded.notes:
        sys.stderr.write(f"mpsprof: {loaded.run_dir}: {loaded.notes}; showing what is valid\n")
    return loaded


def _cmd_view(args: argparse.Namespace) -> int:
    from .cli_args import find_runs

    loaded = _load(find_runs(args.run_dir))
    from .tui.app import view_tui

    view_tui(loaded, list(args.rules))
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from .cli_args import find_runs
    from .report import render_report
    from .results import build_results, say_rule_problems

    loaded = _load(find_runs(args.run_dir))
    results = build_results(loaded.session, list(args.rules), loaded.run_dir)
    say_rule_problems(results.rule_errors)
    from .report.paths import ABSOLUTE_PATHS

    token = ABSOLUTE_PATHS.set(bool(args.absolute_paths))
    try:
        text = render_report(args.format, loaded.session, results)
    finally:
        ABSOLUTE_PATHS.reset(token)
    from .rundir import print_or_write

    error = print_or_write(text, args.output)
    if error:
        raise UsageError(error)
    return 0


def _write_report_file(session: Session, results: Results, path: Path) -> None:
    from .report import format_for_path, render_report
    from .rundir import write_output_text

    # a regular file is replaced through a fresh file; a FIFO, a device or /dev/stdout is written through
    error = write_output_text(path, render_report(format_for_path(path), session, results))
    sys.stderr.write(f"mpsprof: {error}\n" if error else f"mpsprof: wrote {path}\n")


if __name__ == "__main__":
    sys.exit(main())
