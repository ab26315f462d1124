"""Facts about the training loop itself: what counted its steps, and what was not seen.

A run whose training happens in processes the script started (Hogwild) is reported as
the parent's work only unless the run says so. The parent's own training steps tell the
two apart: Hogwild's parent starts the trainers and waits (no optimizer step, no backward
pass of its own), while a parent that trains beside a pool of helpers (checkpoint scoring,
preprocessing) has its training in the run and nothing to warn about. A run whose steps nobody counted (no optimizer step, no backward pass, no DataLoader
batch, no ``mpsprofiler.step()``) has no step figures, no op accounting and therefore
almost no findings; saying "no findings" there would be wrong, so these facts let a rule
say what happened and give the one-line fix.
"""

from __future__ import annotations

import linecache
import os
from typing import Any

from ...session.session import Session
from ...session.steps import signal_words
from .common import rounded
from .registry import analyzer
from .sync_fix import library_path

LOOP_FACTS: tuple[str, ...] = (
    "child_processes", "child_site", "child_site_code", "child_start", "child_start_methods", "child_targets",
    "main_training_steps", "recording_complete",
    "run_ended", "run_s", "step_count", "step_signal", "step_signal_words", "torch_imported",
)
"""Every fact the ``loops`` analyzer may return (declared: no other analyzer may provide one)."""

TRAINING_SIGNALS = frozenset({"optimizer", "backward", "manual"})
"""Step modes that mean the main process trained: DataLoader batches alone may be an
evaluation pass (Hogwild's parent tests the model its children trained)."""


def main_training_steps(mode: str | None, count: int) -> int:
    """The steps the main process trained itself: counted by an optimizer, a backward pass
    or ``mpsprofiler.step()``; 0 for DataLoader batches only, or no signal."""
    return count if mode in TRAINING_SIGNALS else 0


def child_start_facts(children: list[Any]) -> dict[str, Any]:
    """How the script started its processes (``spawn``: ``torch.multiprocessing.spawn``,
    ``process``: a ``Process`` of its own), and the script's line that did, with its code."""
    if not children:
        return {}
    first = next((c for c in children if c.get("via") == "spawn"), children[0])
    facts: dict[str, Any] = {"child_start": str(first.get("via") or "process")}
    file, line = first.get("file"), first.get("line")
    if isinstance(file, str) and file and isinstance(line, int):
        library = library_path(file)
        facts["child_site"] = f"{library if library != file else os.path.basename(file)}:{line}"
        code = linecache.getline(file, line).strip()
        if code:
            facts["child_site_code"] = code
    return facts


@analyzer("loops", provides=LOOP_FACTS)
def loop_facts(session: Session) -> dict[str, Any]:
    steps = session.steps
    run_s = session.exit.duration if session.exit and session.exit.duration is not None else session.last_ts
    targets = sorted({str(c.get("target") or "?") for c in session.children})
    methods = sorted({str(c.get("method") or "?") for c in session.children})
    return {
        **child_start_facts(list(session.children)),
        "child_processes": session.children_started,
        "child_targets": ", ".join(targets[:3]) + (", ..." if len(targets) > 3 else ""),
        "child_start_methods": ", ".join(methods),
        "step_signal": steps.mode,
        "step_signal_words": signal_words(steps.mode),
        "step_count": steps.count,
        "main_training_steps": main_training_steps(steps.mode, steps.count),
        "run_s": rounded(run_s, 3),
        # False while a live run goes on: "no step yet" is no finding before the end (the
        # import of torch alone can take 3 s, long before the first step)
        "run_ended": session.exit is not None,
        # False when events were lost (os._exit skipped the last flush): a step count of 0
        # is then what arrived, not what ran, and "no training steps seen" would be false
        "recording_complete": not session.recording_problems(),
        "torch_imported": bool(session.env.get("torch")),
    }
