"""Where a user's words land on ``mpsprof``'s command line: the command's name, options after
a run directory, mpsprof's options after a script, a directory that holds runs.

Nothing a user types is silently dropped: an option after a run directory is parsed (a run
directory takes no script arguments, so there is nothing else it could be), an mpsprof option
after a script goes to the script (as ``python SCRIPT ARGS`` would do) with a note saying so,
and anything else is refused with the order that works.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from .rundir import DEFAULT_ROOT, EVENTS_FILE, is_run_dir


def check_command(parser: argparse.ArgumentParser, commands: list[str], argv: list[str]) -> None:
    """``mpsprof rnu`` -> "did you mean run?"; ``mpsprof train.py`` -> "mpsprof run train.py"."""
    if not argv or argv[0].startswith("-") or argv[0] in commands:
        return
    word = argv[0]
    if word.endswith(".py") or Path(word).is_file():
        hint = f"; to profile a script: mpsprof run {' '.join(argv)}"
    elif is_run_dir(Path(word)):
        hint = f"; to open a recorded run: mpsprof view {word}"
    else:
        close = difflib.get_close_matches(word, commands, n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]}?" if close else ""
    parser.exit(2, f"mpsprof: error: invalid choice: '{word}' is no mpsprof command{hint}\n  commands: {', '.join(commands)}\n")


def parse_try(parser: argparse.ArgumentParser, try_parser: argparse.ArgumentParser,
              argv: list[str]) -> argparse.Namespace:
    """``mpsprof try``: with a script, what follows it is the script's; with a run directory
    (the recorded command line is rerun, so it takes no arguments), the options after it
    are mpsprof's, parsed as if they came first."""
    args = parser.parse_args(argv)
    rest = list(args.args or [])
    if args.module or args.target is None or not is_run_dir(Path(args.target)):
        sys.stderr.write(mpsprof_options_after_script(try_parser, "try", args.module or args.target, rest))
        return args
    if not rest:
        return args
    order = (f"a run directory reruns its recorded command line, so it takes no script arguments; put "
             f"options before or after it, e.g. mpsprof try {args.target} --steps 20 --pairs 3 --budget 120")
    if "--" in argv:  # argparse drops the "--" itself: read it from what the user typed
        try_parser.error(f"-- {' '.join(rest)}: script arguments after a run directory; {order}")
    again = try_parser.parse_args([*rest, args.target], namespace=argparse.Namespace(**vars(args)))
    if again.target != args.target or again.args:  # a word that is no option among them
        stray = again.target if again.target != args.target else " ".join(again.args)
        try_parser.error(f"{stray}: not an option of mpsprof try; {order}")
    return again


def mpsprof_options_after_script(own: argparse.ArgumentParser, command: str, script: str | None,
                                 script_args: list[str]) -> str:
    """An mpsprof option written after the script goes to the script (as with ``python``),
    but the user probably meant it for mpsprof: the note that says where it went and the
    order that works ("" when there is none). ``run`` prints it after its summary (the
    script's own stderr stays byte for byte what python gives), ``try`` at once."""
    if not script or "--" in script_args[:1]:
        return ""
    names = {s for s in own._option_string_actions if s.startswith("--") and s not in ("--help", "--output")}
    meant = [t.split("=", 1)[0] for t in script_args if t.split("=", 1)[0] in names]
    if not meant:
        return ""
    first = meant[0]
    return (f"mpsprof: note: {', '.join(dict.fromkeys(meant))} after {script} "
            f"{'goes' if len(meant) == 1 else 'go'} to the script, as `python {script} {first}` "
            f"would; mpsprof's own options go before the script: mpsprof {command} {first} ... {script}\n")


PYTHON_NAME = re.compile(r"python(?:3(?:\.\d+)?)?w?(?:\.exe)?")
"""An interpreter's name as typed before a script: ``python``, ``python3``, ``python3.12``."""


class PythonPrefixError(ValueError):
    """``mpsprof run python ...`` that cannot be run as written (another interpreter, an option)."""


def python_prefix(target: str, script_args: list[str]) -> tuple[str, bool, list[str]] | None:
    """``mpsprof run python train.py --lr 1e-3`` (the order py-spy and scalene take): the
    ``(target, module, script arguments)`` that ``mpsprof run train.py --lr 1e-3`` has, or
    None where ``target`` names no interpreter. It was "no such script: python".

    mpsprof starts the script with the Python it runs in (the probe is imported there), so
    the interpreter is dropped only where it is that one: the same ``sys.prefix`` (a venv's
    ``python`` is a link to the base interpreter, whose packages are not the venv's). Another
    interpreter, or an interpreter option other than ``-m`` and ``-u``, raises
    :class:`PythonPrefixError` with the command that works."""
    if not PYTHON_NAME.fullmatch(Path(target).name) or target.endswith(".py"):
        return None
    found = shutil.which(target) if os.sep not in target else target
    if found is None or not os.path.isfile(found) or not os.access(found, os.X_OK):
        return None
    rest = list(script_args)
    while rest[:1] == ["-u"]:  # unbuffered: mpsprof passes the script's output on line by line anyway
        rest = rest[1:]
    if not _same_python(found):
        raise PythonPrefixError(
            f"{target} is another Python than the one mpsprof runs in ({sys.executable}), and mpsprof "
            f"starts the script with its own. Install mpsprof in that one (from mpsprof's folder: "
            f"{target} -m pip install -e .) and run it from there: {target} -m mpsprofiler run "
            f"{' '.join(rest) or 'train.py'}")
    if not rest:
        raise PythonPrefixError("run needs a script after python (mpsprof run train.py ...) or -m MODULE")
    if rest[0] == "-m" and len(rest) > 1:
        return rest[1], True, rest[2:]
    if rest[0].startswith("-m") and len(rest[0]) > 2:
        return rest[0][2:], True, rest[1:]
    if rest[0].startswith("-") and rest[0] != "-":
        raise PythonPrefixError(
            f"{Path(target).name} {rest[0]}: interpreter options are not passed on; mpsprof runs the script as "
            f"`python SCRIPT ARGS` would (set PYTHON* variables such as PYTHONWARNINGS in the "
            f"environment instead): mpsprof run {' '.join(rest[1:]) or 'train.py'}")
    return rest[0], False, rest[1:]


def _same_python(found: str) -> bool:
    """``found`` is this interpreter: the same file, or the same ``sys.prefix`` (asked of it)."""
    try:
        if os.path.abspath(found) == os.path.abspath(sys.executable):
            return True  # (not samefile: a venv's python links to the base interpreter)
        out = subprocess.run([found, "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True,
                             timeout=30, stdin=subprocess.DEVNULL)
        return out.returncode == 0 and os.path.realpath(out.stdout.strip()) == os.path.realpath(sys.prefix)
    except (OSError, subprocess.SubprocessError, ValueError):
        return False


def find_runs(paths: list[Path]) -> list[Path]:
    """``mpsprof view mytrain``: a directory that holds runs (in ``mpsprof-runs/`` or
    directly) opens its newest run, and the others are listed to choose from."""
    if len(paths) != 1 or is_run_dir(paths[0]) or not paths[0].is_dir():
        return paths
    base = paths[0]
    found: list[tuple[float, Path]] = []
    for folder in (base / DEFAULT_ROOT, base):
        try:
            children = list(folder.iterdir()) if folder.is_dir() else []
        except OSError:
            continue
        for child in children:
            if is_run_dir(child):
                try:
                    found.append(((child / EVENTS_FILE).stat().st_mtime, child))
                except OSError:
                    continue
    if not found:
        return paths
    found.sort()
    newest = found[-1][1]
    if len(found) == 1:
        sys.stderr.write(f"mpsprof: {base} holds one run: opening {newest}\n")
    else:
        others = [str(p) for _, p in reversed(found[:-1])]
        shown = "\n".join(f"    {p}" for p in others[:10]) + (f"\n    ... {len(others) - 10} more"
                                                               if len(others) > 10 else "")
        sys.stderr.write(f"mpsprof: {base} holds {len(found)} runs: opening the newest, {newest}; "
                         f"the others (name one to open it):\n{shown}\n")
    return [newest]
