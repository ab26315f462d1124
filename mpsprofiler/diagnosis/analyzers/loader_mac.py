"""What a Linux run's DataLoader worker restarts would cost on a Mac.

Workers that are not persistent start again at every pass over their loader. On Linux the
default start method is fork (Python's ``multiprocessing`` docs, "Contexts and start
methods"; a DataLoader without ``multiprocessing_context`` uses it, torch/utils/data/
dataloader.py): a copy of the process, milliseconds. On macOS the default is spawn (since
Python 3.8, the same docs; torch's DataLoader docs, "Platform-specific behaviors"): every
start is a new Python interpreter that imports torch and the script again. An
early-stopping loop of 20 short epochs with 2 workers pays that 19 times there and nothing
measurable here, so the restarts are priced from this run's own ``import torch``, timed in
CPU seconds by the probe (probe/import_watch.py): not the busy machine's wall clock, and a
lower bound (the script's other imports come on top).

Only loaders whose start method is the platform's default fork: a script that set one
(``multiprocessing_context=``, ``set_start_method``) runs the same on a Mac, and a run that
spawned already has its restarts measured (worker-respawn, loader_restarts.py).
"""

from __future__ import annotations

from typing import Any

from ...events.payloads import DataLoaderFields
from ...session.loaders import rebuilt_count
from ...session.session import Session
from .common import num, rounded, start_method
from .loader_place import line_place
from .loader_restarts import COSTLY_SHARE, of_steps, respawn_lines

MAC_RESPAWN_FACTS = ("mac_respawn_restarts", "mac_respawn_passes", "mac_respawn_workers", "mac_respawn_start_s",
                     "mac_respawn_cost_s", "mac_respawn_share", "mac_respawn_fix", "mac_respawn_place",
                     "mac_respawn_code", "mac_respawn_measured")
"""The facts :func:`mac_respawn` returns (the ``dataloader`` analyzer declares them)."""


def mac_respawn(session: Session, measured: dict[str, Any]) -> dict[str, Any]:
    """The restarts of forked, non-persistent workers during the steps, priced as a Mac
    would start them (spawn), with the fix at the loaders' own lines; empty where there is
    nothing to predict: not Linux, no timed ``import torch``, no loader read twice.
    ``measured``: the worker-respawn facts of this run (dataloader.py ``_respawn``): where
    the restarts cost that rule's share here already, it says so with the Mac's figure in
    its evidence (``mac_respawn_measured``), one finding, not two."""
    if not str(session.env.get("platform") or "").startswith("linux"):
        return {}
    start_s = num(session.env.get("torch_import_cpu_s"))
    total_s = session.steps.total_dur
    if not start_s or start_s <= 0 or total_s <= 0:
        return {}
    found = [(d, n) for d, n in ((d, _restarts(session, d)) for d in session.dataloaders.values()) if n]
    if not found:
        return {}
    restarts = sum(n for _, n in found)
    # the workers of one restart start side by side: the first batch waits for about one start
    cost = restarts * start_s
    loaders = sorted((d for d, _ in found), key=lambda d: num(d.get("created")) or 0)
    out: dict[str, Any] = {
        "mac_respawn_restarts": restarts, "mac_respawn_passes": max(n for _, n in found) + 1,
        "mac_respawn_workers": max(int(num(d.get("num_workers")) or 0) for d in loaders),
        "mac_respawn_start_s": start_s, "mac_respawn_cost_s": rounded(cost, 3),
        # of the steps' time on the Mac, where the restarts come on top of what ran here
        "mac_respawn_share": rounded(cost / (total_s + cost)), "mac_respawn_fix": "persistent",
        "mac_respawn_measured": bool(measured.get("workers_respawn_each_epoch"))
        and (num(measured.get("respawn_share")) or 0.0) >= COSTLY_SHARE,
    }
    rebuilt = [d for d in loaders if rebuilt_count(d) > 1]
    if rebuilt:  # a new loader every epoch starts new workers whatever persistent_workers says
        place = line_place(session, rebuilt[0])
        out["mac_respawn_fix"] = "rebuilt" if place else "persistent"
        out["mac_respawn_place"] = place
        return out
    lines = respawn_lines(session, loaders)
    if lines is not None:
        out["mac_respawn_fix"] = "persistent_line"
        out["mac_respawn_place"], out["mac_respawn_code"] = lines
    return out


def _restarts(session: Session, loader: DataLoaderFields) -> int:
    """How many times the steps waited for this loader's workers to start again: its
    passes during the steps less the first (workers start once whatever the settings). 0
    for a loader read once, persistent or worker-less, or whose start method the script
    chose (it starts the same way on a Mac)."""
    if (not num(loader.get("num_workers")) or loader.get("persistent_workers")
            or loader.get("multiprocessing_context") or loader.get("start_method_set")
            or start_method(session, loader) != "fork"):
        return 0
    passes, _ = of_steps(loader, "first_fetches", "first_fetch_s")
    return max(0, int(passes or 0) - 1)
