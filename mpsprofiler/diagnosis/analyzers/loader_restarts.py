"""What each loader's worker restarts cost where a run reads several loaders.

A training loader and a validation loader, each with non-persistent workers started with
spawn (macOS's default): every pass over either starts its workers again, and each new
interpreter imports torch and the script (a second or more of CPU each, torch's DataLoader
docs: "Platform-specific behaviors"). The steps hold both loaders' restarts (a validation
pass between two training steps lies inside the next step), so the epoch-start steps
cannot be told apart by batch counts as with a single loader (dataloader.py
``_epoch_starts``). The probe sums each loader's iterators' first batches apart
(``first_fetches``/``first_fetch_s``, probe/loader_sites.py): against the mean of its other
fetches, each pass's first batch shows what starting its workers cost that loader.

Without that, timm's train.py layout (train and validation loaders, 2 spawned workers
each, 3 epochs) read the start-ups as batch work: "building batches needs more CPU than
this machine has", told to use lighter transforms, where ``persistent_workers=True`` at
both loaders' lines was the fix. Forked workers start in milliseconds, and their first
batch's extra wait is filling the prefetch pipeline, which persistent workers wait for
too: their start-up CPU is measured apart (probe/worker_startup.py) and not judged here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...events.payloads import DataLoaderFields
from ...session.session import Session
from .common import num, rounded, start_method
from .loader_place import LOADER_CALLS
from .source_edit import rewrite_call

STARTUP_METHODS = ("spawn", "forkserver")
"""Start methods whose workers start a new interpreter that imports torch and the script
(a second or more each, torch's DataLoader docs: "Platform-specific behaviors"); a fork
copies the process in milliseconds."""

COSTLY_SHARE = 0.05
"""A loader's restarts are named in the fix when they cost 5% of the steps' time (the
worker-respawn rule's own threshold)."""


@dataclass
class LoaderRestarts:
    """One loader's restarts: how many, the extra wait of each pass's first batch."""

    loader: DataLoaderFields
    restarts: int
    extra_s: float
    passes: int

    @property
    def cost_s(self) -> float:
        return self.restarts * self.extra_s


def loader_restarts(session: Session, loader: DataLoaderFields) -> LoaderRestarts | None:
    """The restarts of ``loader``'s spawned workers, or None where it has none to judge:
    no workers, persistent ones, forked ones, one pass, or no first batches recorded
    (older recordings). The first pass starts its workers whatever the settings, so it is
    no restart; each pass's first batch is compared with the mean of the loader's other
    fetches (those include waits for a busy CPU too: the start-up is what exceeds them)."""
    workers = num(loader.get("num_workers"))
    if not workers or loader.get("persistent_workers") or start_method(session, loader) not in STARTUP_METHODS:
        return None
    firsts, first_s = of_steps(loader, "first_fetches", "first_fetch_s")
    fetches, fetch_s = of_steps(loader, "fetches", "fetch_s")
    if not firsts or firsts < 2 or first_s is None or not fetches or fetch_s is None:
        return None
    extra = max(0.0, first_s / firsts - fetch_s / fetches)
    return LoaderRestarts(loader, int(firsts) - 1, extra, int(firsts))


def of_steps(loader: DataLoaderFields, count: str, seconds: str) -> tuple[float | None, float | None]:
    """A loader's ``count`` batches and their ``seconds`` less those taken after the last
    step (``after_*``, probe/loader_sites.py): a pass begun after the training (a final
    evaluation) started its workers for no step, and its first batch is no restart the
    steps waited for. Older recordings have no ``after_*`` keys: the whole counts."""
    fields: Mapping[str, Any] = loader
    n, s = num(fields.get(count)), num(fields.get(seconds))
    if n is None or s is None:
        return n, s
    after_n, after_s = num(fields.get(f"after_{count}")) or 0.0, num(fields.get(f"after_{seconds}")) or 0.0
    return max(0.0, n - after_n), max(0.0, s - after_s)


def several_loaders(session: Session, stalled: DataLoaderFields) -> dict[str, Any]:
    """The worker-respawn facts of a run reading several loaders: the restarts of all of
    them (the steps waited for each), the fix ``persistent_workers=True`` at the line of
    each loader whose restarts cost at least :data:`COSTLY_SHARE` of the steps' time. Empty
    where no loader restarts spawned workers; ``stalled``: the loader the other facts
    describe, named first among loaders of one line."""
    found = [r for r in (loader_restarts(session, d) for d in session.dataloaders.values()) if r is not None]
    cost = sum(r.cost_s for r in found)
    restarts = sum(r.restarts for r in found)
    total_s = session.steps.total_dur
    if not found or cost <= 0 or not restarts or total_s <= 0:
        return {}
    out: dict[str, Any] = {
        "epochs_seen": max(r.passes for r in found), "respawn_wait_ms": rounded(cost / restarts * 1000.0, 3),
        "respawn_cost_s": rounded(cost, 4), "respawn_share": rounded(cost / total_s), "respawn_why": "persistent",
        "respawn_fix": "persistent",
    }
    # in the script's order (construction numbers), as a user reads the loaders' lines
    costly = sorted((r for r in found if r.cost_s >= COSTLY_SHARE * total_s),
                    key=lambda r: (num(r.loader.get("created")) or 0, r.loader is not stalled))
    lines = respawn_lines(session, [r.loader for r in costly])
    if lines is not None:
        # their construction numbers: the loaders `mpsprof patch` edits (patch/plan.py)
        out["respawn_loaders"] = [int(num(r.loader.get("created")) or 0) for r in costly]
        out["respawn_fix"] = "persistent_line"
        out["respawn_place"], out["respawn_code"] = lines
    return out


def respawn_lines(session: Session, loaders: list[DataLoaderFields]) -> tuple[str, str] | None:
    """(their places, the code) of :func:`respawn_line` for each of ``loaders``, in the
    order given; None where any line cannot be rewritten (or none is given)."""
    lines = [fix for fix in (respawn_line(session, d) for d in loaders) if fix]
    if not lines or len(lines) != len(loaders):
        return None
    code = lines[0][1] if len(lines) == 1 else "\n".join(f"# {p}\n{c}" for p, c in lines)
    return " and ".join(p for p, _ in lines), code


def respawn_line(session: Session, loader: DataLoaderFields) -> tuple[str, str] | None:
    """(``file:line``, the script's own DataLoader call with ``persistent_workers=True``,
    every other argument as written: its dataset, shuffle, start method), or None where the
    line cannot be rewritten. A generic ``DataLoader(dataset, ...)`` snippet named a variable
    the script does not have and dropped its arguments."""
    file, line = loader.get("file"), num(loader.get("line"))
    if not file or not line:
        return None
    rewrite = rewrite_call(str(file), int(line), LOADER_CALLS, {"persistent_workers": "True"})
    if rewrite is None:
        return None
    return rewrite.place(session.run.get("cwd")), rewrite.after
