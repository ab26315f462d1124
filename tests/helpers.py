"""Run a script with plain ``python`` and with ``python -m mpsprofiler run --headless``.

The profiled run must behave byte for byte like the plain one: same stdout, same exit
status, same stderr once the mpsprof summary block (which starts with the line
``── mpsprof ──`` and runs to the end) is removed. Other test modules may import this.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = Path(__file__).resolve().parent / "scripts"
SUMMARY_MARK = "── mpsprof ─".encode()
SLEEPY_LOADER_ENV = {"STEPS": "40", "SLEEP": "0.02", "WORK": "0.006"}
"""tests/scripts_try/sleepy_loader.py's settings for the TUI's experiments (``t``, ``P``) on
its recording (tests/conftest.py, ``sleepy_loader_recording``): a stall that 8-step runs
show; their runs inherit these from the app's environment."""


class FakeClock:
    """A clock a test moves by hand, for code that takes ``clock: Callable[[], float]``:
    set or add to ``t``; with ``tick`` each reading also moves it on by that much (code
    that must see time pass between two readings)."""

    def __init__(self, t: float = 0.0, tick: float = 0.0) -> None:
        self.t = t
        self.tick = tick

    def __call__(self) -> float:
        self.t += self.tick
        return self.t


def child_env(**extra: str | None) -> dict[str, str]:
    """The environment for child processes: one thread, mpsprofiler importable anywhere."""
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    for key in ("MPSPROF_CHANNEL", "MPSPROF_OPTIONS"):
        env.pop(key, None)
    for key, value in extra.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def strip_summary(stderr: bytes) -> bytes:
    """stderr without the summary block mpsprof appends at the end (and its blank line)."""
    at = stderr.rfind(SUMMARY_MARK)
    if at < 0 or (at > 0 and stderr[at - 1 : at] != b"\n"):
        return stderr
    return stderr[: at - 1] if at > 0 else b""


@dataclass
class Result:
    returncode: int
    stdout: bytes
    stderr: bytes
    seconds: float

    @property
    def script_stderr(self) -> bytes:
        return strip_summary(self.stderr)

    @property
    def summary_text(self) -> str:
        at = self.stderr.rfind(SUMMARY_MARK)
        return self.stderr[at:].decode("utf-8", "replace") if at >= 0 else ""


def _run(cmd: Sequence[str], cwd: Path | None, input: bytes | None, env: dict[str, str] | None,
         timeout: float) -> Result:
    started = time.monotonic()
    proc = subprocess.run(
        list(cmd), cwd=cwd, input=input, stdin=None if input is not None else subprocess.DEVNULL,
        capture_output=True, env=env if env is not None else child_env(), timeout=timeout,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started)


def python_cmd(args: Sequence[str]) -> list[str]:
    return [sys.executable, *args]


def mpsprof_cmd(args: Sequence[str], run_dir: Path, options: Sequence[str] = ()) -> list[str]:
    """``args`` as for python (``["-m", "pkg.mod", ...]`` or ``["script.py", ...]``)."""
    args = list(args)
    if args and args[0] == "-m":
        args = ["-m", args[1], "--", *args[2:]]
    return [sys.executable, "-m", "mpsprofiler", "run", "--headless", "-o", str(run_dir), *options, *args]


def mpsprof_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 180,
                stdin: int | None = subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
    """``python -m mpsprofiler ARGS`` in text mode, output captured, environment ``child_env()``
    unless given; ``stdin=None`` inherits the test's stdin."""
    return subprocess.run([sys.executable, "-m", "mpsprofiler", *args], capture_output=True, text=True, stdin=stdin,
                          env=env if env is not None else child_env(), cwd=cwd, timeout=timeout, check=False)


def run_python(args: Sequence[str], cwd: Path | None = None, input: bytes | None = None,
               env: dict[str, str] | None = None, timeout: float = 120) -> Result:
    return _run(python_cmd(args), cwd, input, env, timeout)


def run_mpsprof(args: Sequence[str], run_dir: Path, cwd: Path | None = None, input: bytes | None = None,
                env: dict[str, str] | None = None, options: Sequence[str] = (), timeout: float = 120) -> Result:
    return _run(mpsprof_cmd(args, run_dir, options), cwd, input, env, timeout)


_LOG_PREFIX = re.compile(rb"^([WIEF])\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ ", re.MULTILINE)
"""The glog-style head of torch's own log lines (``W1203 14:16:16.067000 510 file.py:183]``):
its time and pid differ between any two runs, plain or profiled."""


_RESOURCE_TRACKER = re.compile(rb"^\S*resource_tracker\.py:\d+: UserWarning: resource_tracker: .*\n(?:  warnings\.warn\(.*\n)?",
                               re.MULTILINE)
"""CPython's resource tracker at interpreter exit ("There appear to be 1 leaked semaphore
objects", then "No such file or directory" for it): a race between a spawn DataLoader's
worker shutdown and the tracker, seen under plain python too (CI, tests/scripts/loader.py
spawn), so on either side it says nothing of mpsprof."""


def _unstamped(stderr: bytes) -> bytes:
    return _LOG_PREFIX.sub(rb"\1MMDD hh:mm:ss PID ", _RESOURCE_TRACKER.sub(b"", stderr))


def assert_same(plain: Result, profiled: Result) -> None:
    """Identical exit status, stdout and (summary stripped) stderr, with a readable diff;
    torch's log lines compare without their time stamp and pid."""
    assert profiled.returncode == plain.returncode, (plain.returncode, profiled.returncode, profiled.stderr[-3000:])
    assert profiled.stdout == plain.stdout, _diff(plain.stdout, profiled.stdout)
    script_stderr, plain_stderr = _unstamped(profiled.script_stderr), _unstamped(plain.stderr)
    assert script_stderr == plain_stderr, _diff(plain_stderr, script_stderr)


def compare(args: Sequence[str], run_dir: Path, parallel: bool = True, options: Sequence[str] = (),
            **kwargs: Any) -> tuple[Result, Result]:
    """Run both ways (at the same time unless ``parallel`` is False: half the wall time
    for torch scripts) and assert they match; returns both results for further checks."""
    if parallel:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(2) as pool:
            plain_f = pool.submit(run_python, args, **kwargs)
            profiled_f = pool.submit(run_mpsprof, args, run_dir, options=options, **kwargs)
            plain, profiled = plain_f.result(), profiled_f.result()
    else:
        plain = run_python(args, **kwargs)
        profiled = run_mpsprof(args, run_dir, options=options, **kwargs)
    assert_same(plain, profiled)
    return plain, profiled


def sleepy_loader_run(recording: Path, tmp_path: Path, monkeypatch: Any) -> tuple[Path, str]:
    """The shared sleepy-loader recording (tests/conftest.py, ``sleepy_loader_recording``)
    copied into ``tmp_path/run`` for one TUI experiment, with SLEEPY_LOADER_ENV set where
    the experiment's runs inherit it (the app's environment): (the run, its stall
    finding's rule)."""
    env = child_env(**SLEEPY_LOADER_ENV)
    for key in ("STEPS", "SLEEP", "WORK", "OMP_NUM_THREADS", "PYTHONPATH"):
        monkeypatch.setenv(key, env[key])
    run = tmp_path / "run"
    shutil.copytree(recording, run)
    rule = next(f["rule"] for f in read_summary(run)["findings"] if f["rule"].startswith("dataloader-stall"))
    return run, rule


def run_summary(out: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """``mpsprof run --headless -o OUT ARGS`` (options, script, the script's arguments) from
    the repository root, where findings name ``tests/...`` paths; it must exit 0. Returns
    the run's summary.json with the run directory added as ``_dir``."""
    proc = mpsprof_cli("run", "--headless", "-o", str(out), *args, cwd=REPO, env=env or child_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary: dict[str, Any] = json.loads((Path(out) / "summary.json").read_text(encoding="utf-8"))
    summary["_dir"] = str(out)
    return summary


def one_finding(summary: dict[str, Any], *rules: str) -> dict[str, Any]:
    """The summary's only finding of any of ``rules`` (there must be exactly one)."""
    found = [f for f in summary["findings"] if f["rule"] in rules]
    assert len(found) == 1, [f["rule"] for f in summary["findings"]]
    return found[0]


def fix_code(finding: dict[str, Any]) -> str:
    """The code of a finding's fix: its first ```python block."""
    return str(finding["fix"].split("```python\n", 1)[1].split("```", 1)[0])


def line_of(script: Path, text: str) -> int:
    """The number of the first line of ``script`` that contains ``text``."""
    return next(i for i, t in enumerate(Path(script).read_text().splitlines(), 1) if text in t)


class Recorded:
    """A script copied into ``tmp/src`` and profiled there once (``tmp/run``, with
    ``mpsprof run --headless RUN_ARGS SCRIPT SCRIPT_ARGS`` from that directory), so that
    ``mpsprof patch --apply`` and an edit after the run touch only the copy."""

    def __init__(self, tmp: Path, source: Path, *run_args: str, script_args: tuple[str, ...] = (),
                 env: dict[str, str] | None = None) -> None:
        self.dir = tmp / "src"
        self.dir.mkdir()
        self.script = self.dir / source.name
        shutil.copy(source, self.script)
        self.run = tmp / "run"
        proc = mpsprof_cli("run", "--headless", "-o", str(self.run), *run_args, str(self.script), *script_args,
                           cwd=self.dir, env=env)
        self.proc = proc
        assert (self.run / "summary.json").exists(), proc.stderr[-3000:]
        self.rules = [f["rule"] for f in json.loads((self.run / "summary.json").read_text())["findings"]]

    def patch(self, *args: str) -> subprocess.CompletedProcess[str]:
        return mpsprof_cli("patch", str(self.run), *args, cwd=self.dir)

    def diff(self, rule: str) -> str:
        proc = self.patch("--rule", rule)
        assert proc.returncode == 0, proc.stderr[-2000:]
        path = self.run / f"fix-{rule}.patch"
        assert path.exists(), (self.rules, proc.stdout)
        text = path.read_text()
        assert text in proc.stdout  # printed too
        return text

    def check_applies_and_runs(self, rule: str, tmp: Path, *script_args: str, run: bool = True) -> str:
        """The patch applies with git and patch(1) in a fresh git repository holding the
        script's directory, and the patched script runs there (``run=False``: the caller
        runs it there itself, under mpsprof, which keeps its exit status and output)."""
        text = self.diff(rule)
        repo = tmp / f"repo-{rule}"
        shutil.copytree(self.dir, repo)
        subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
        patch_path = self.run / f"fix-{rule}.patch"
        git = subprocess.run(["git", "apply", "--check", str(patch_path)], cwd=repo, capture_output=True, text=True)
        assert git.returncode == 0, git.stderr
        dry = subprocess.run(["patch", "-p1", "--dry-run", "-i", str(patch_path)], cwd=repo, capture_output=True,
                             text=True)
        assert dry.returncode == 0, dry.stdout + dry.stderr
        subprocess.run(["git", "apply", str(patch_path)], cwd=repo, check=True)
        if not run:
            return text
        ran = subprocess.run([sys.executable, self.script.name, *script_args], cwd=repo, capture_output=True,
                             text=True, env=child_env(), timeout=120)
        assert ran.returncode == 0, ran.stderr[-3000:]
        return text


def read_events(run_dir: Path) -> list[dict[str, Any]]:
    lines = (Path(run_dir) / "events.jsonl").read_bytes().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def read_summary(run_dir: Path, missing_ok: bool = False) -> dict[str, Any]:
    """The run's summary.json; ``{}`` when there is none and ``missing_ok``."""
    path = Path(run_dir) / "summary.json"
    if missing_ok and not path.exists():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def loud_rules(summary: dict[str, Any]) -> list[str]:
    """The rules of the summary's warning and critical findings, in its order."""
    return [f["rule"] for f in summary["findings"] if f["severity"] in ("warning", "critical")]


def _diff(a: bytes, b: bytes) -> str:
    import difflib

    lines = difflib.unified_diff(
        a.decode("utf-8", "replace").splitlines(), b.decode("utf-8", "replace").splitlines(),
        "python", "mpsprof", lineterm="", n=2,
    )
    return "\n" + "\n".join(list(lines)[:60])


def drive_recorded(body: Any, size: tuple[int, int], run: Path) -> None:
    """Open the recorded run in the real app (Pilot, no animations) and await ``body(app, pilot)``."""
    import asyncio

    from mpsprofiler.session.recording import load_run
    from mpsprofiler.tui.app import recorded_app

    app = recorded_app(load_run(run))
    app.animation_level = "none"

    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            await body(app, pilot)

    asyncio.run(main())
