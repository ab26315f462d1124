"""Warm-up as the findings and the summary's headline count it: one definition.

The steps mpsprof sampled for op accounting (``session.ops.sampled``) are slow by its own
doing (every op recorded), and steps that also ran a loop of the script's own over a
DataLoader (an evaluation) by the script's: neither is the framework's warm-up (kernel
compilation, allocator growth, caches). :func:`framework_warmup` judges them as steady
steps when it counts the warm-up. The steady figures still start after every leading slow
step (``StepStats.warmup``): a sampled step is no steady one either. Where the two differ
the headline says what the steps between them were (an HF Trainer run on a busy machine
read "4 warm-up" in its headline and "The first 3 steps are warm-up" in its finding:
step 3, sampled, was the fourth).
"""

from __future__ import annotations

from .session import Session
from .steps import StepPoint, detect_warmup

OWN_WORK_BATCHES = 2
"""A step that fetched at least this many times the DataLoader batches of a usual step,
plus one, ran a loop of the script's own over a DataLoader (an evaluation, a cache fill)."""


def own_work_steps(early: list[StepPoint]) -> set[int]:
    """Early steps (never the first) slow by the script's own work, not the framework's.

    The probe counts the DataLoader batches each step fetched: a training step fetches its
    usual few (one, or one per micro-batch), a step that also evaluated the model on a
    test loader (minGPT's adder: ``if trainer.iter_num % 500 == 0`` in the batch callback,
    so at iteration 0) or filled a cache fetched tens more. Loops without a DataLoader
    (nanoGPT's ``get_batch``) give no such sign: their steps are judged as they are.
    The first step is left out: it is the framework's warm-up either way.
    """
    if len(early) < 4:
        return set()
    counts = sorted(p.batches for p in early)
    usual = counts[len(counts) // 2]
    if usual < 1:
        return set()
    return {p.i for p in early[1:] if p.batches >= OWN_WORK_BATCHES * usual + 1}


def set_aside(session: Session) -> tuple[set[int], set[int]]:
    """(steps sampled by mpsprof after step 0, steps slow by the script's own work)."""
    return {i for i in session.ops.sampled if i > 0}, own_work_steps(session.steps.early)


def framework_warmup(session: Session) -> int:
    """Leading warm-up steps, the sampled and own-work steps judged as steady ones."""
    steps = session.steps
    w = steps.warmup
    sampled, own = set_aside(session)
    aside = sampled | own
    if aside and steps.early:
        kept = [p.dur for p in steps.early if p.i not in aside]
        half = sorted(kept[len(kept) // 2:])
        if half:
            ref = half[len(half) // 2]
            w = detect_warmup([ref if p.i in aside else p.dur for p in steps.early])
    return w


def warmup_cost(session: Session) -> float:
    """Seconds the warm-up steps (:func:`framework_warmup`, set-aside steps left out) took
    beyond what steady steps would have taken."""
    steps = session.steps
    sampled, own = set_aside(session)
    aside = sampled | own
    if not aside:
        return steps.warmup_cost()
    warm = [p for p in steps.early[:framework_warmup(session)] if p.i not in aside]
    med = steps.quantile(0.5) or 0.0
    return max(0.0, sum(p.dur for p in warm) - med * len(warm))


def between(session: Session) -> tuple[int, int]:
    """(steps between the warm-up and the first steady step, how many of them mpsprof sampled)."""
    w, start = framework_warmup(session), session.steps.warmup
    sampled = set_aside(session)[0]
    gap = [p.i for p in session.steps.early[w:start]]
    return len(gap), sum(1 for i in gap if i in sampled)
