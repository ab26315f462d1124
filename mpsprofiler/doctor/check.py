"""What every doctor check returns, and the small readings of the environment they share.

The checks themselves are :mod:`.checks` (Python, torch and its companions, CUDA, the
machine) and :mod:`.mps` (the Apple GPU and the variables its allocator reads); the
command that runs them and prints the verdicts is the package, :mod:`mpsprofiler.doctor`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..environment import mps_min_macos_for
from ..events.payloads import EnvFields

STATUSES = ("ok", "warn", "fail", "info")
RANK = {"info": 0, "ok": 1, "warn": 2, "fail": 3}
"""How bad each status is: the worst one is the verdict of several."""
MIN_TORCH = (2, 1)
GIB = 1024**3


@dataclass
class Check:
    """One verdict: ``fix`` is Markdown (inline code in backticks), empty when nothing to do."""

    id: str
    title: str
    status: str
    detail: str
    fix: str = ""


def version_tuple(text: str | None) -> tuple[int, ...] | None:
    """(2, 9) from "2.9.0+cpu" or "2.10.0.dev20250101"; (14, 5) from "14.5"."""
    if not text:
        return None
    match = re.match(r"\s*(\d+)(?:\.(\d+))?", text)
    if not match:
        return None
    return (int(match.group(1)), int(match.group(2) or 0))


def mps_min_macos(torch_version: str | None) -> tuple[int, int] | None:
    """The oldest macOS a torch release runs MPS on (:func:`~mpsprofiler.environment.mps_min_macos_for`:
    ``MPSDevice::MPSDevice`` in aten/src/ATen/mps/MPSDevice.mm)."""
    version = version_tuple(torch_version)
    return None if version is None else mps_min_macos_for(version)


def fmt_version(version: tuple[int, ...]) -> str:
    """ "14" for (14, 0), "12.3" for (12, 3): how Apple names its releases."""
    return str(version[0]) if version[1:] in ((), (0,)) else ".".join(str(p) for p in version)


def on_mac(env: EnvFields) -> bool:
    return env.get("platform") == "darwin"


def env_vars(env: EnvFields) -> dict[str, str]:
    return env.get("pytorch_env") or {}
