"""CPU thread facts: busy intra-op threads plus busy DataLoader workers against the free cores.

Busy threads are torch's intra-op threads of the training process plus the DataLoader
workers' measured CPU use (cores' worth): torch sets every worker to one thread
(``torch.set_num_threads(1)`` in ``torch/utils/data/_utils/worker.py``), and a worker that
sleeps on I/O, using 4 ms of CPU per 100 ms, is not busy at all; without CPU readings no
worker is counted (:func:`_workers_busy`). Oversubscribed OpenMP threads spin and wait for
each other (a 3 ms CPU step has been seen to take 180 ms with 2 OpenMP threads while the
other core was busy).

When the script sets the count itself (``torch.set_num_threads(16)`` inside ``main()``,
``os.environ["OMP_NUM_THREADS"] = "16"``), a fix "at the start of the script" is undone by
that line: the fix names the line and rewrites it (:mod:`.source_edit`).
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from typing import Any

from ...session.session import Session
from ..template import BLANK
from . import loader_profile
from .common import num, rounded, training_loader
from .registry import analyzer
from .source_edit import read_tree, rewrite_call, short_path

THREAD_FACTS: tuple[str, ...] = (
    "busy_threads", "cores", "cores_free", "cores_left", "others_busy_cores", "others_busy_share", "others_top", "others_top_text", "others_window_s", "max_workers_for_cores", "omp_num_threads", "suggested_torch_threads",
    "thread_cut", "thread_busy_with", "thread_fix_code", "thread_fix_where", "thread_oversubscription", "thread_set_place", "thread_workers_text",
    "thread_worker_processes", "thread_workers_busy",
    "torch_threads", "torch_threads_text", "workers_busy_cores",
)
"""Every fact the ``threads`` analyzer may return (declared: no other analyzer may provide one)."""


@dataclass
class ThreadJudgement:
    """How many threads the cores can take: the one judgement the analyzer, the
    Environment panel and ``mpsprof doctor`` share (:func:`judge_threads`)."""

    busy: float
    cores_free: float
    ratio: float
    suggested: int
    oversubscribed: bool


OVERSUBSCRIBED = 1.5
"""Busy threads per free core from which the rule warns (see rules/thread-oversubscription.yaml)."""


def judge_threads(torch_threads: int, cores: int, workers_busy: float = 0.0, others_busy: float = 0.0
                  ) -> ThreadJudgement:
    """torch's threads against the cores left free by busy workers and by other programs.

    ``workers_busy`` and ``others_busy`` are cores' worth of CPU use (measured CPU seconds
    per second). The suggestion leaves a core per busy worker and the cores other programs
    use: an OpenMP team larger than the free cores spins waiting for its slowest thread.
    """
    free = max(1.0, cores - others_busy)
    busy = torch_threads + workers_busy
    suggested = max(1, math.floor(free - workers_busy + 0.25))
    ratio = round(busy / free, 3)  # as the rule's fact thread_oversubscription: one verdict, not two
    return ThreadJudgement(busy, free, ratio, suggested, torch_threads >= 2 and ratio >= OVERSUBSCRIBED)


@analyzer("threads", provides=THREAD_FACTS)
def thread_facts(session: Session) -> dict[str, Any]:
    env = session.env
    threads = torch_threads(session)
    cores = num(env.get("cores_physical")) or num(env.get("cores_logical"))
    workers = _workers(session)
    facts: dict[str, Any] = {
        "torch_threads": int(threads) if threads else None,
        # the count; rules/thread-oversubscription.yaml words it ("1 intra-op thread", "4 intra-op threads")
        "torch_threads_text": int(threads) if threads else None,
        "cores": int(cores) if cores else None,
        "omp_num_threads": env.get("omp_num_threads"),
        # None where not measured (no CPU samples): the stall rules read it (a missing fact fails a condition)
        "others_busy_share": None,
    }
    if not threads or not cores:
        return facts
    workers_busy, measured = _workers_busy(session, workers)
    others = others_busy(session)
    if others is not None:
        facts["others_busy_cores"] = rounded(others[0], 2)
        facts["others_busy_share"] = rounded(others[0] / cores, 3)
        facts["others_window_s"] = rounded(others[1], 1)
        facts.update(others_named(session))
    j = judge_threads(int(threads), int(cores), workers_busy, others[0] if others is not None else 0.0)
    facts["workers_busy_cores"] = rounded(workers_busy, 2)
    facts["busy_threads"] = int(round(j.busy))
    facts["cores_free"] = rounded(j.cores_free, 2)
    # what the other programs left, as measured (cores_free, the judgement's, is at least one
    # core: "1.5 of 2 cores busy ... about 1.0 cores were left" read wrong)
    facts["cores_left"] = rounded(max(0.0, int(cores) - (others[0] if others is not None else 0.0)), 2)
    facts["thread_oversubscription"] = rounded(j.ratio, 3)
    facts["suggested_torch_threads"] = j.suggested
    facts["max_workers_for_cores"] = max(0, int(cores) - int(threads))
    # the workers beside torch's threads: a code and its figures, worded by rules/thread-oversubscription.yaml
    facts["thread_workers_text"] = _workers_text(workers, workers_busy, measured)
    facts["thread_worker_processes"] = workers
    facts["thread_workers_busy"] = workers_busy
    # fewer threads helps only where torch runs more than the cores left free: a script
    # already at (or below) the count would be told to set what it has (1 thread on a busy
    # 2-core machine was told `torch.set_num_threads(1)`). The rule files word the code.
    facts["thread_cut"] = "cut" if int(threads) > j.suggested else "enough"
    # who keeps the cores busy: other programs, or (measured under a quarter of a core
    # beside it) the training itself, its threads and workers, where "close other busy
    # programs" and "measure on a quiet machine" would send the user after nothing
    facts["thread_busy_with"] = ("own_" if others is not None and others[0] < OWN_ONLY else "others_") + facts["thread_cut"]
    if facts["thread_cut"] == "cut":
        facts.update(thread_fix_place(session, j.suggested))
    return facts


def torch_threads(session: Session) -> float | None:
    """torch's intra-op thread count: one seen while training (if the probe reports one)
    beats the start-up one, as scripts call torch.set_num_threads() after the probe read
    the environment."""
    return num(session.model.get("torch_threads")) or num(session.env.get("torch_threads"))


OWN_ONLY = 0.25
"""Cores' worth of other programs' CPU under which the training's own threads and workers
are what keeps the cores busy (``thread_busy_with``)."""

MIN_OTHERS_WINDOW_S = 2.0
"""The machine's and the training's CPU totals over at least 2 s (4 samples) before other
programs' use is claimed: one sample's share is too noisy to change any advice."""


def others_busy(session: Session) -> tuple[float, float] | None:
    """Cores' worth of CPU that processes outside the training's tree used during the run,
    and the window (s): the machine's busy share of all logical CPUs (psutil.cpu_times
    between samples) less the training process's and its children's own CPU seconds.

    The Environment panel and ``mpsprof doctor`` pass the same figure (or, without a run,
    a reading of their own) to :func:`judge_threads`.
    """
    logical = num(session.env.get("cores_logical"))
    points = [m for m in session.memory.series.points() if m.cpu_main_s is not None]
    if not logical or len(points) < 2:
        return None
    a, b = points[0], points[-1]
    window = b.ts - a.ts
    if window < MIN_OTHERS_WINDOW_S or a.cpu_main_s is None or b.cpu_main_s is None:
        return None
    busy = [(m.ts - prev.ts, m.sys_busy) for prev, m in zip(points, points[1:], strict=False)
            if m.sys_busy is not None and m.ts > prev.ts]
    span = sum(dt for dt, _ in busy)
    if span < MIN_OTHERS_WINDOW_S:
        return None
    machine = sum(dt * (share or 0.0) for dt, share in busy) / span * logical
    own = (b.cpu_main_s - a.cpu_main_s) + ((b.cpu_workers_s or 0.0) - (a.cpu_workers_s or 0.0))
    return max(0.0, machine - own / window), window


def others_named(session: Session) -> dict[str, Any]:
    """``others_top``: the launcher's busiest programs outside the training's tree (name,
    cores), and ``others_top_text``: ": top: python -c 98%, python -m pytest 40%" (percent of
    one core, as ``top`` shows it), written as no words when the launcher named none (the
    title's optional clause: a missing fact would read "(not measured)" there)."""
    others = session.others or {}
    top = [t for t in others.get("top") or [] if t.get("cores", 0.0) >= 0.05][:3]
    text = (": top: " + ", ".join(f"{t['name']} {t['cores'] * 100:.0f}%" for t in top)) if top else BLANK
    return {"others_top": [dict(t) for t in top] or None, "others_top_text": text}


def workers_busy(session: Session) -> float:
    """The training DataLoader's workers' busy cores as the thread rule counts them (0
    without workers or without a measurement): the Environment panel passes it, with the
    run's other figures, to doctor's thread check, so both judge the same numbers."""
    return _workers_busy(session, _workers(session))[0]


def _workers(session: Session) -> int:
    loader = training_loader(session)
    return int(num(loader.get("num_workers")) or 0) if loader else 0


def _workers_busy(session: Session, workers: int) -> tuple[float, bool]:
    """The workers' CPU use in cores over the steady steps, and whether it was measured.

    Unmeasured (a run too short for two samples), they count as no busy core: a worker
    that sleeps on I/O uses almost none (4 ms of CPU per 100 ms), so counting each as a
    busy thread warned of oversubscription right after mpsprof's own num_workers fix, and
    an instrument that did not measure must not make a finding."""
    if not workers:
        return 0.0, True
    fig = loader_profile.measure(session, session.steps.steady, late=True)
    if fig.workers_cpu is None or not fig.window_s:
        return 0.0, False
    return min(float(workers), max(0.0, fig.workers_cpu / fig.window_s)), True


def _workers_text(workers: int, busy: float, measured: bool) -> str:
    """Which sentence says the workers: ``none``, ``unmeasured``, ``measured`` (cores of CPU)
    or ``measured_one`` (about one core: the rule file's singular)."""
    if not workers:
        return "none"
    if not measured:
        return "unmeasured"
    return "measured" if abs(busy - 1.0) > 0.05 else "measured_one"


def thread_fix_place(session: Session, suggested: int) -> dict[str, Any]:
    """The script's own line that sets the count, rewritten; else where to add one.
    ``thread_fix_where`` says which (``set_num_threads``, ``omp_num_threads``, ``script_start``):
    ``rules/thread-oversubscription.yaml`` and ``rules/dataloader-stall.yaml`` word it."""
    cwd = session.run.get("cwd")
    calls = [c for c in session.model.get("threads_set") or [] if isinstance(c, dict) and c.get("file")]
    for call in reversed(calls):  # the last call made is the one in force
        rewrite = rewrite_call(str(call["file"]), int(call.get("line") or 0), ("set_num_threads",),
                               {}, positional={0: str(suggested)})
        if rewrite is not None:
            place = rewrite.place(cwd)
            return {"thread_set_place": place, "thread_fix_code": rewrite.after,
                    "thread_fix_where": "set_num_threads"}  # codes the rule files word
    env_line = _omp_assignment(session)
    if env_line is not None:
        path, line, code = env_line
        place = f"{short_path(path, cwd)}:{line}"
        new = code.rsplit("=", 1)[0].rstrip() + f' = "{suggested}"' if "setdefault" not in code else (
            code.split(",", 1)[0] + f', "{suggested}")')
        return {"thread_set_place": place, "thread_fix_code": new,
                "thread_fix_where": "omp_num_threads"}
    return {"thread_set_place": None,
            "thread_fix_code": f"import torch\ntorch.set_num_threads({suggested})",
            "thread_fix_where": "script_start"}


def _omp_assignment(session: Session) -> tuple[str, int, str] | None:
    """``os.environ["OMP_NUM_THREADS"] = ...`` or ``os.environ.setdefault("OMP_NUM_THREADS", ...)``
    in the script itself (a one-line statement)."""
    target = session.run.get("target") or session.run.get("script")
    if not target or session.run.get("module"):
        return None
    import os

    path = str(target) if os.path.isabs(str(target)) else os.path.join(str(session.run.get("cwd") or ""), str(target))
    read = read_tree(path)
    if read is None:
        return None
    source, tree = read
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt):
            continue
        hit = False
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript):
            key = node.targets[0].slice
            hit = isinstance(key, ast.Constant) and key.value == "OMP_NUM_THREADS"
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            call = node.value
            hit = (isinstance(call.func, ast.Attribute) and call.func.attr == "setdefault" and bool(call.args)
                   and isinstance(call.args[0], ast.Constant) and call.args[0].value == "OMP_NUM_THREADS")
        if hit and node.lineno == node.end_lineno:
            code = ast.get_source_segment(source, node)
            if code:
                return path, node.lineno, code
    return None
