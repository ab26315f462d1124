"""``mpsprof doctor``: is this machine set up to train on its accelerator, and if not, why.

Every check reads only the environment dict of :func:`mpsprofiler.environment.collect_environment`
(environment variables included, under ``pytorch_env``), so the macOS, Rosetta and Intel-Mac
cases are tested on Linux with fake dicts. Nothing here initialises CUDA.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from ..events.payloads import EnvFields
from ..units import console_text, text_console
from .check import RANK, STATUSES, Check, mps_min_macos, version_tuple
from .checks import (
    check_cuda,
    check_hardware,
    check_numpy,
    check_python,
    check_threads,
    check_torch,
    check_torchvision,
)
from .mps import FALLBACK, check_mps, check_mps_fallback, check_mps_watermarks

__all__ = [
    "CHECKS", "STATUSES", "Check", "add_doctor_arguments", "check_cuda", "check_hardware", "check_mps",
    "check_mps_fallback", "check_mps_watermarks", "check_numpy", "check_python", "check_threads", "check_torch",
    "check_torchvision", "collect_for_doctor", "main_doctor", "mps_min_macos", "nvidia_driver_present",
    "render_text", "run_checks", "summary", "to_json", "version_tuple",
]


CHECKS: tuple[Callable[[EnvFields], Check], ...] = (
    check_python, check_torch, check_torchvision, check_numpy, check_mps, check_cuda,
    check_mps_fallback, check_mps_watermarks, check_hardware, check_threads,
)


def run_checks(env: EnvFields | None = None) -> list[Check]:
    """Every check over ``env`` (collected here when None); a crashing check reports itself."""
    if env is None:
        env = collect_for_doctor()
    results = []
    for check in CHECKS:
        try:
            results.append(check(env))
        except Exception as exc:  # a doctor that crashes helps nobody
            name = check.__name__.removeprefix("check_")
            results.append(Check(name, name, "warn", f"Check failed: {type(exc).__name__}: {exc}"))
    return results


def collect_for_doctor() -> EnvFields:
    """The environment, importing torch safely first.

    A non-numeric ``PYTORCH_ENABLE_MPS_FALLBACK`` can abort ``import torch`` on a Mac (torch
    parses it with ``std::stoi`` while loading), so it is hidden during the import and still
    reported: that is exactly the case the user runs doctor for.
    """
    from ..environment import collect_environment, pytorch_env

    raw = os.environ.get(FALLBACK)
    hide = "torch" not in sys.modules and raw is not None and not re.match(r"\s*[+-]?\d", raw)
    if hide:
        del os.environ[FALLBACK]
    try:
        env = collect_environment(probe_gpu_name=True)
    finally:
        if hide:
            os.environ[FALLBACK] = raw  # type: ignore[assignment]
    env["pytorch_env"] = pytorch_env()
    env["numpy"] = _installed_version("numpy")
    extra: dict[str, Any] = env  # type: ignore[assignment]  # doctor-only keys beside the EnvFields
    extra["torchvision"] = _installed_version("torchvision")
    extra["torchvision_torch"] = _torch_pin("torchvision")
    env["nvidia_driver"] = nvidia_driver_present()
    from ..launcher.others import measure_once

    extra.update(measure_once() or {})  # other programs' CPU now: the thread check counts the free cores
    return env


def nvidia_driver_present() -> bool | None:
    """On Linux, whether an NVIDIA driver is loaded (its /proc entry or a device node);
    None elsewhere (macOS has none; Windows is not looked at)."""
    if not sys.platform.startswith("linux"):
        return None
    import glob

    return os.path.exists("/proc/driver/nvidia/version") or bool(glob.glob("/dev/nvidia[0-9]*"))


def _torch_pin(dist: str) -> str | None:
    """The ``torch==X`` a distribution requires, from its metadata."""
    from importlib import metadata

    try:
        requires = metadata.requires(dist) or []
    except metadata.PackageNotFoundError:
        return None
    for req in requires:
        m = re.match(r"\s*torch\s*==\s*([\w.+]+)", req)
        if m and "extra ==" not in req:
            return m.group(1)
    return None


def _installed_version(dist: str) -> str | None:
    """A distribution's version from its metadata, without importing it."""
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


# --- output -----------------------------------------------------------------------------

_STYLE = {"ok": "bold green", "warn": "bold yellow", "fail": "bold red", "info": "bold blue"}


def summary(checks: list[Check]) -> dict[str, int]:
    return {status: sum(1 for c in checks if c.status == status) for status in STATUSES}


def to_json(checks: list[Check], env: EnvFields) -> dict[str, Any]:
    """The machine-readable report (``mpsprof doctor --json``)."""
    worst = max((c.status for c in checks), key=RANK.__getitem__, default="ok")
    return {
        "schema": "mpsprof.doctor/1",
        "status": "ok" if worst == "info" else worst,
        "summary": summary(checks),
        "checks": [asdict(c) for c in checks],
        "environment": env,
    }


def _markdown_text(text: str, color: bool) -> Any:
    """Inline code in a terminal gets a colour instead of backticks; a pipe keeps the Markdown."""
    from rich.text import Text

    if not color:
        return Text(text)
    out = Text()
    for i, part in enumerate(text.split("`")):
        out.append(part, style="cyan" if i % 2 else "")
    return out


def render_text(checks: list[Check], env: EnvFields | None = None, *,
                color: bool | None = None, width: int | None = None) -> str:
    """A table for people: coloured on a terminal, plain (Markdown fixes intact) in a pipe."""
    from rich.table import Table
    from rich.text import Text

    color = sys.stdout.isatty() if color is None else color
    if width is None:
        width = min(shutil.get_terminal_size((100, 24)).columns, 110) if color else 100
    console = text_console(color, width)
    if env:
        head = [env.get("os"), f"Python {env.get('python')}", f"torch {env.get('torch') or 'missing'}"]
        console.print(Text("mpsprof doctor: " + " | ".join(str(h) for h in head if h), style="bold"))
        console.print()
    table = Table(box=None, show_header=False, pad_edge=False, padding=(0, 2, 1, 0))
    table.add_column("status", no_wrap=True)
    table.add_column("check", no_wrap=True, style="bold")
    table.add_column("detail", overflow="fold")
    for check in checks:
        body = _markdown_text(check.detail, color)
        if check.fix:
            body.append("\nfix: ", style="bold")
            body.append_text(_markdown_text(check.fix, color))
        table.add_row(Text(check.status.upper(), style=_STYLE.get(check.status, "")), check.title, body)
    console.print(table)
    console.print()
    counts = summary(checks)
    console.print(", ".join(f"{n} {s}" for s, n in counts.items()))
    return console_text(console).rstrip() + "\n"


def add_doctor_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the checks and environment as JSON")


def main_doctor(args: argparse.Namespace) -> int:
    """Print the checks; the exit code is 0 because doctor reports, it does not gate."""
    env = collect_for_doctor()
    checks = run_checks(env)
    if getattr(args, "json", False):
        sys.stdout.write(json.dumps(to_json(checks, env), indent=2) + "\n")
    else:
        sys.stdout.write(render_text(checks, env))
    return 0
