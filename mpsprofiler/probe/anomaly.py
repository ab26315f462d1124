"""Autograd's anomaly detection left on in training: is it on at a sampled step's backward
pass, and which of the script's lines turned it on.

``torch.autograd.set_detect_anomaly(True)`` and ``with torch.autograd.detect_anomaly():``
are debugging switches; torch's own docstring (torch/autograd/anomaly_mode.py,
``detect_anomaly``) warns that "this mode should be enabled only for debugging as the
different tests will slow down your program execution": every forward op records its
Python traceback and every backward op's output is checked for NaN (a device sync each on
MPS and CUDA). A script that keeps the line from a debugging session pays that at every step.

Both forms (and a direct ``torch.set_anomaly_enabled``) go through
``torch.set_anomaly_enabled`` looked up on the ``torch`` module at call time, so one
wrapper there sees each call that turns it on, with the script's line. Whether it is on
while the training runs is read once per sampled step, at its first backward pass
(``probe/ops.py``): ``torch.is_anomaly_enabled()``, one C call, no cost at other steps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .thread_sites import user_site

MAX_SITES = 4


class AnomalySites:
    """The script's calls that turned anomaly detection on: file, line, calls, check_nan."""

    def __init__(self) -> None:
        self.sites: list[dict[str, Any]] = []

    def record(self, mode: Any, check_nan: Any) -> None:
        if not mode:
            return  # the context manager's exit, or a script turning it off
        site = user_site(3)
        if site is None:
            return
        file, line = site
        for known in self.sites:
            if known["file"] == file and known["line"] == line:
                known["calls"] += 1
                return
        if len(self.sites) < MAX_SITES:
            self.sites.append({"file": file, "line": line, "calls": 1, "check_nan": bool(check_nan)})


SITES = AnomalySites()
"""One per process, like the wrapper on the ``torch`` module that feeds it."""


def reading() -> dict[str, Any] | None:
    """At a sampled step's backward pass: None while anomaly detection is off, else whether
    it checks for NaN and the lines that turned it on."""
    import torch

    if not torch.is_anomaly_enabled():
        return None
    return {"check_nan": bool(torch.is_anomaly_check_nan_enabled()), "sites": [dict(s) for s in SITES.sites]}


def wrap_switch(mode: Callable[[bool, bool], bool]) -> Callable[[], None]:
    """Wrap ``torch.set_anomaly_enabled`` (what both of torch's switches call, looked up on
    the ``torch`` module at call time): ``mode(enabled, check_nan)`` runs first and gives
    the mode passed on to torch. The one wrapper of the recording (``install``) and of
    ``--set torch.detect_anomaly=false`` (``overrides.Overrides.install_anomaly``); the
    returned function puts torch's back where this wrapper is still the one installed."""
    import torch

    original = torch.set_anomaly_enabled

    def set_anomaly_enabled(enabled: bool, check_nan: bool = True) -> None:  # torch's own names
        return original(mode(enabled, check_nan), check_nan)

    torch.set_anomaly_enabled = set_anomaly_enabled

    def uninstall() -> None:
        if torch.set_anomaly_enabled is set_anomaly_enabled:
            torch.set_anomaly_enabled = original

    return uninstall


def install(on_error: Callable[[BaseException], None]) -> Callable[[], None]:
    """Record the script's calls that turn anomaly detection on; each call is passed on
    unchanged, whatever the recording does."""

    def record(enabled: bool, check_nan: bool) -> bool:
        try:
            SITES.record(enabled, check_nan)
        except Exception as exc:
            on_error(exc)
        return enabled

    return wrap_switch(record)
