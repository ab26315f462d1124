"""Small helpers several analyzers share (which loader trains, how many cores, units)."""

from __future__ import annotations

import math
from typing import Any

from ...devices import kinds as device_kinds
from ...events.payloads import DataLoaderFields, EnvFields
from ...session.session import Session

MIB = 1024**2


def training_loader(session: Session) -> DataLoaderFields | None:
    """The DataLoader that feeds the steps: the one with the most batches, else the first.

    The probe does not count batches per loader, so "most batches" is the longest
    ``len``; a validation loader is usually shorter than the training one.
    """
    if not session.dataloaders:
        return None
    best_id = min(
        session.dataloaders,
        key=lambda k: (-_int(session.dataloaders[k].get("len")), k),
    )
    return session.dataloaders[best_id]


def compute_cores(env: EnvFields) -> tuple[int | None, str]:
    """Cores worth filling with work, and their kind as a name the rules word
    (``performance``, ``physical``, ``logical``, ``unknown``: ``reason_core_kind`` in
    ``rules/dataloader-stall.yaml``).

    On Apple silicon the efficiency cores are much slower, so only the performance
    cores count where macOS reports them; elsewhere the physical cores (SMT siblings
    share one core's units).
    """
    counts = (("performance", env.get("cores_performance")), ("physical", env.get("cores_physical")),
              ("logical", env.get("cores_logical")))
    for kind, count in counts:
        n = _pos(count)
        if n:
            return n, kind
    return None, "unknown"


def start_method(session: Session, loader: DataLoaderFields) -> str | None:
    """How the loader's workers start: its own context, else the method the script fixed
    for the process, else the platform default."""
    ctx = loader.get("multiprocessing_context")
    if ctx:
        return str(ctx)
    if not loader.get("num_workers"):
        return None
    fixed = loader.get("start_method_set")
    if fixed:
        # the script fixed it (`multiprocessing.set_start_method("spawn")`): a loader given
        # workers by a fix starts them so (priced at a spawn's start-up, not a fork's)
        return str(fixed)
    # the platform default: spawn on macOS and Windows; on Linux fork, forkserver from 3.14
    platform = str(session.env.get("platform") or "")
    if platform == "darwin" or platform.startswith("win"):
        return "spawn"
    if not platform.startswith("linux"):
        return None
    version = tuple(int(p) for p in str(session.env.get("python") or "0.0").split(".")[:2] if p.isdigit())
    return "forkserver" if version >= (3, 14) else "fork"


def is_asynchronous(session: Session) -> bool:
    return device_kinds.is_asynchronous(session.device_kind)


def _pos(v: Any) -> int | None:
    try:
        n = int(v)
    except (TypeError, ValueError):
        return None
    return n if n > 0 else None


def _int(v: Any) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return 0


def num(v: Any) -> float | None:
    """A finite number, or None (facts must never carry NaN: JSON has none)."""
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def rounded(v: float | None, digits: int = 4) -> float | None:
    return None if v is None else round(v, digits)
