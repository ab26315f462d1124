"""CPU seconds an ``mpsprof`` command spends before and around its work: its imports.

Why: every ``mpsprof run`` / ``report`` / ``patch`` pays the launcher's imports, every
profiled training pays the probe's boot before the script's first line, and the test suite
starts hundreds of commands. Process CPU time (user + system, from ``getrusage``), not wall
time: on a shared machine the wall clock measures the other programs too. Each case is the
median of ``--repeat`` runs; the number of modules loaded is printed beside it, which does
not depend on the load at all.

- ``parent``: the ``mpsprof`` process alone (the launcher, the session and diagnosis after
  a run, the renderers), read by ``atexit`` in that process;
- ``boot``: the training process up to the script's first line (interpreter, site, the
  probe's boot and start), read by the script itself; ``python tiny.py`` alone is the
  ``bare`` row, so ``boot - bare`` is what the probe adds to the training's start-up;
- ``total``: the command and every process it waited for (``os.wait4``).

Bytecode caches are on, as for an installed package and in CI (.ci/run unsets
PYTHONDONTWRITEBYTECODE); they go to a scratch ``PYTHONPYCACHEPREFIX``, warmed by one run
of each case first (``--no-cache``: PYTHONDONTWRITEBYTECODE with a checkout that has no
caches, as in this project's container: the standard library's own caches are read, every
mpsprofiler module is compiled from its source at each import). ``--baseline`` names another checkout (its
``mpsprofiler`` is imported, e.g. ``git archive OLD | tar -x -C /tmp/old``): its runs alternate
with this checkout's, so both see the same load::

    OMP_NUM_THREADS=1 python benchmarks/startup.py [--repeat 10] [--baseline /tmp/old] [--no-cache]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WRAPPER = """\
import atexit, os, resource, sys
def _report():
    r = resource.getrusage(resource.RUSAGE_SELF)
    with open(os.environ["STARTUP_PARENT"], "a") as f:
        f.write(f"{r.ru_utime + r.ru_stime} {len(sys.modules)}\\n")
atexit.register(_report)
sys.argv = ["mpsprof", *sys.argv[1:]]
from mpsprofiler.cli import main
sys.exit(main())
"""
"""``python -m mpsprofiler ARGS`` with the process's own CPU written at exit."""

SCRIPT = """\
import os, resource, sys
r = resource.getrusage(resource.RUSAGE_SELF)
with open(os.environ["STARTUP_BOOT"], "a") as f:
    f.write(f"{r.ru_utime + r.ru_stime} {len(sys.modules)}\\n")
"""
"""The training script: its first line reads what the process spent before it."""


def _env(root: Path, scratch: Path, cache: bool) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(root), OMP_NUM_THREADS="1", STARTUP_PARENT=str(scratch / "parent"),
               STARTUP_BOOT=str(scratch / "boot"))
    env.pop("PYTHONPYCACHEPREFIX", None)
    if cache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(scratch / "pycache")
    else:  # the installed standard library's caches are read, mpsprofiler's sources compiled
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _total(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    """CPU seconds of the command and all it waited for."""
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0,):
        raise SystemExit(f"{argv}: exit status {proc.returncode}")
    return usage.ru_utime + usage.ru_stime


def _take(path: Path) -> tuple[float, int] | None:
    if not path.exists():
        return None
    cpu, modules = path.read_text().split()
    path.unlink()
    return float(cpu), int(modules)


def measure(roots: list[Path], repeat: int, cache: bool) -> list[dict[str, dict[str, list[float]]]]:
    """For each root: case -> {"parent"/"boot"/"total"/"... modules": one value per run}; the
    roots' runs alternate case by case."""
    scratch = Path(tempfile.mkdtemp(prefix="mpsprof-startup-"))
    (scratch / "tiny.py").write_text(SCRIPT)
    recorded = scratch / "recorded"
    mpsprof = [sys.executable, "-c", WRAPPER]
    cases = {
        "bare python tiny.py": [sys.executable, "tiny.py"],
        "mpsprof --help": [*mpsprof, "--help"],
        "mpsprof run --headless tiny.py": [*mpsprof, "run", "--headless", "-o", "RUN", "tiny.py"],
        "mpsprof report (md)": [*mpsprof, "report", str(recorded), "--format", "md", "-o", os.devnull],
        "mpsprof report (json)": [*mpsprof, "report", str(recorded), "--format", "json", "-o", os.devnull],
    }
    envs = [_env(root, scratch, cache) for root in roots]
    subprocess.run([*mpsprof, "run", "--headless", "-o", str(recorded), "tiny.py"], env=envs[0], cwd=scratch,
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out: list[dict[str, dict[str, list[float]]]] = [{name: {} for name in cases} for _ in roots]
    for i in range(repeat + 1):  # the first round warms the bytecode caches
        for name, argv in cases.items():
            for r, env in enumerate(envs):
                run_argv = [str(scratch / f"run{r}-{i}") if a == "RUN" else a for a in argv]
                for f in ("parent", "boot"):
                    _take(scratch / f)
                total = _total(run_argv, env, scratch)
                if i == 0:
                    continue
                row = out[r][name]
                row.setdefault("total", []).append(total)
                for part in ("parent", "boot"):
                    got = _take(scratch / part)
                    if got is not None:
                        row.setdefault(part, []).append(got[0])
                        row.setdefault(part + " modules", []).append(got[1])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--baseline", type=Path, help="another checkout, measured alternately with this one")
    parser.add_argument("--no-cache", action="store_true", help="no bytecode caches (PYTHONDONTWRITEBYTECODE)")
    args = parser.parse_args()
    roots = [ROOT] + ([args.baseline.resolve()] if args.baseline else [])
    load = os.getloadavg()
    results = measure(roots, args.repeat, not args.no_cache)
    print(f"median of {args.repeat}, CPU seconds (user + system), bytecode caches "
          f"{'off' if args.no_cache else 'on'}; load {load[0]:.1f} before, {os.getloadavg()[0]:.1f} after, "
          f"{os.cpu_count()} CPUs")
    for root, rows in zip(roots, results, strict=True):
        print(root)
        for name, row in rows.items():
            parts = []
            for part in ("parent", "boot", "total"):
                if part in row:
                    text = f"{part} {statistics.median(row[part]):.3f} s"
                    if part + " modules" in row:
                        text += f" ({int(statistics.median(row[part + ' modules']))} modules)"
                    parts.append(text)
            print(f"  {name:32} " + ", ".join(parts))


if __name__ == "__main__":
    main()
