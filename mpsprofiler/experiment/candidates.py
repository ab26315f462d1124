"""Which findings' fixes can be tried without editing the script, and as which ``--set``.

Each entry turns a finding's facts into settings (see :mod:`.settings`); a finding
whose fix needs a code change (batch size, dtype, device placement) has none. The
values are the ones the finding's own fix text proposes (its ``suggested_*`` facts),
so the experiment proves the advice as given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..devices.mps_rules import watermark_pair
from ..settings import label
from .trial import Window

if TYPE_CHECKING:
    from ..diagnosis.findings import Finding


@dataclass
class Candidate:
    rule: str
    title: str
    settings: dict[str, Any]
    window: Window | None = None
    """Set where the fix shows in a few steps only (a side loader's): what its trial spans."""
    loader: str | None = None
    """The loader it changes as the user counts them (the finding's ``loader_label``)."""

    @property
    def text(self) -> str:
        return label(self.settings, self.loader)


def _int(facts: dict[str, Any], name: str) -> int | None:
    value = facts.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value)


def _workers(facts: dict[str, Any]) -> dict[str, Any] | None:
    """The loader the finding names (``dataloader.N``: its construction number), else all.

    Changing every loader of a script with several would start workers the finding never
    asked for (and their memory): only the one that kept the training waiting changes."""
    n = _int(facts, "suggested_num_workers")
    if n is None or n == _int(facts, "num_workers"):
        return None
    reason = facts.get("num_workers_reason")
    if isinstance(reason, list) and "iterable" in reason:
        return None  # an IterableDataset's workers each yield the whole stream: not safe to try as is
    created = _int(facts, "loader_created")
    change: dict[str, Any] = {"num_workers": n}
    every = facts.get("loader_created_all")
    if isinstance(every, list) and len(every) > 1 and all(isinstance(c, int) for c in every):
        # a loader the script builds anew every epoch: each of its constructions changes
        # (persistent workers would not outlive one), as the fix's rewritten line does
        return {"dataloader": {str(c): dict(change) for c in every}}
    if n > 0 and not facts.get("persistent_workers") and facts.get("loader_keeps") != "single":
        change["persistent_workers"] = True  # as the fix writes it: the workers start once
        # (not for a loader the run read in one pass: loader_role.single_pass, nor does the fix)
    settings: dict[str, Any] = {"dataloader": {str(created) if created else "*": change}}
    keep = _int(facts, "stall_threads_keep")
    if facts.get("stall_threads") == "cut" and keep:
        settings["torch"] = {"num_threads": keep}  # the fix gives the workers cores torch's threads held
    return settings


SIDE_PASSES = 2.5
"""A side loader's trial spans this many of its passes (two whole ones, wherever they fall)."""
MAX_WINDOW_STEPS = 2000


def side_window(facts: dict[str, Any]) -> Window | None:
    """The window for a side loader's fix (``side_steps_per_pass``: read once every that many
    steps), None for a loader that serves the steps, or one read too seldom to time here."""
    every = facts.get("side_steps_per_pass")
    if isinstance(every, bool) or not isinstance(every, (int, float)) or every <= 0:
        return None
    steps = int(every * SIDE_PASSES) + 1
    if steps > MAX_WINDOW_STEPS:
        return None
    return Window(steps, f"the loader is read in a few steps only (about every {every:.0f} steps): each run takes "
                         f"at least {steps} steps and is judged by its mean step, those steps included")


def _persistent(facts: dict[str, Any]) -> dict[str, Any] | None:
    if facts.get("respawn_fix") == "rebuilt":
        return None  # built anew every epoch: the fix moves the loader out of the loop, an edit
    return {"dataloader": {"*": {"persistent_workers": True}}}


def _threads(facts: dict[str, Any]) -> dict[str, Any] | None:
    n = _int(facts, "suggested_torch_threads")
    return {"torch": {"num_threads": n}} if n and n >= 1 else None


def _no_pin(facts: dict[str, Any]) -> dict[str, Any] | None:
    return {"dataloader": {"*": {"pin_memory": False}}}


def _watermark(facts: dict[str, Any]) -> dict[str, Any] | None:
    ratio = facts.get("suggested_watermark_ratio")
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 <= ratio <= 2:
        return None
    # both ratios: the high one alone below the default low (1.4 on unified memory) makes
    # torch refuse to start MPS (setLowWatermarkRatio, MPSAllocator.mm)
    return {"env": watermark_pair(float(ratio))}


def _no_anomaly(facts: dict[str, Any]) -> dict[str, Any] | None:
    return {"torch": {"detect_anomaly": False}}


FIXES: dict[str, Callable[[dict[str, Any]], dict[str, Any] | None]] = {
    "dataloader-stall": _workers,
    "dataloader-stall-critical": _workers,
    "worker-respawn": _persistent,
    "thread-oversubscription": _threads,
    "pin-memory-mps": _no_pin,
    "memory-pressure": _watermark,
    "cache-growth": _watermark,
    "anomaly-detection-on": _no_anomaly,
}
WINDOWED_RULES = frozenset(rule for rule, make in FIXES.items() if make is _workers)
"""Rules whose fix may need a trial window (:func:`fix_window`): a loader's workers."""


def fix_window(rule: str, facts: dict[str, Any]) -> Window | None:
    """The window ``rule``'s fix is timed over: a loader's workers, where the loader is a side
    loader (:func:`side_window`); None for every other fix. ``try`` and ``patch --prove`` ask here."""
    return side_window(facts) if rule in WINDOWED_RULES else None


def candidate_for(finding: Finding | dict[str, Any], facts: dict[str, Any] | None = None) -> Candidate | None:
    """The change that applies ``finding``'s fix, or None when it needs a code edit.

    A finding carries the facts of its condition, title and evidence; the values its fix
    text uses (``suggested_num_workers``) come from the run's full ``facts`` when given."""
    d = finding if isinstance(finding, dict) else finding.to_dict()
    make = FIXES.get(str(d.get("rule")))
    if make is None:
        return None
    merged = {**(facts or {}), **dict(d.get("facts") or {})}
    try:
        settings = make(merged)
    except Exception:
        return None
    if not settings:
        return None
    rule = str(d.get("rule"))
    named = merged.get("loader_label") if rule in WINDOWED_RULES else None
    return Candidate(rule=rule, title=str(d.get("title", "")), settings=settings, window=fix_window(rule, merged),
                     loader=named if isinstance(named, str) else None)


def candidates(findings: list[Finding], facts: dict[str, Any] | None = None) -> list[Candidate]:
    out, seen = [], set()
    for f in findings:
        c = candidate_for(f, facts)
        if c is not None and c.text not in seen:
            seen.add(c.text)
            out.append(c)
    return out
