"""Data-loading facts: how long steps wait for batches, and what the DataLoader should be.

The wait share is measured on steady-state steps only (warm-up would inflate it), and
the wait, compute and step figures are means over the same steps, so they add up. What
the loader does while the training waits (computing, waiting for I/O, queued for a busy
CPU, or indexing memory) is in :mod:`.loader_profile`; the ``num_workers`` that follows
from it, and the reason (codes and figures), in :mod:`.loader_advice`.
"""

from __future__ import annotations

from statistics import median
from typing import Any

from ...events.payloads import DataLoaderFields
from ...session.loaders import rebuilt_count
from ...session.session import Session
from ...session.steps import StepPoint
from . import loader_profile
from .batch_index_fix import BATCH_INDEX_FACTS, batch_index_facts
from .common import (
    compute_cores,
    is_asynchronous,
    num,
    rounded,
    start_method,
)
from .loader_advice import (
    FIGURES_FACTS,
    REASON_FACTS,
    advise,
    free_cores,
    median_step,
    steady_ratio,
    step_loads,
    step_ratios,
)
from .loader_mac import MAC_RESPAWN_FACTS, mac_respawn
from .loader_place import PLACE_FACTS, in_steps, place_facts, shares, stalled_loader
from .loader_restarts import STARTUP_METHODS, respawn_line, several_loaders
from .loader_role import read_aside, restarts
from .loops import TRAINING_SIGNALS
from .registry import analyzer
from .source_edit import short_path
from .threads import others_busy, thread_fix_place, torch_threads

STALL_STEP_SHARE = 0.15
"""A step "stalls" when 15% of it is data wait (the rules' warning level)."""


DATALOADER_FACTS: tuple[str, ...] = (
    "batch_form", "batch_size", "batch_size_arg", "batches_per_step", "best_step_ms", "compute_ms", "cores_for_workers",
    "cores_free_for_workers", "cores_others_busy", "data_wait_ms", "data_wait_share", "dataloader_count",
    "device_idle_share_while_waiting", "epochs_seen", "fetch_cpu_ms", "fetch_runq_ms", "first_stall_step",
    "last_step", "load_cpu_ms", "load_ms", "loader_bound", "loader_code", "loader_created", "loader_created_all", "loader_figures",
    "loader_name", "loader_place", "loader_settings", "loader_where",
    "loading_wait_share", "loading_wait_share_low", "machine_busy_share", "num_workers", "num_workers_helps",
    "num_workers_needed", "num_workers_range", "num_workers_reason", "persistent_workers", "pin_memory", "prefetch_factor",
    "respawn_code", "respawn_cost_s", "respawn_first_step", "restart_how", "restart_cpu", "worker_startup_cpu_s", "respawn_fix",
    "respawn_place", "respawn_loaders", "respawn_why", "respawn_share", "respawn_wait_ms", "respawn_refill_ms", "respawn_basis", "side_steps_per_pass", "stall_advice", "stall_subject",
    "stall_thread_code", "stall_thread_place", "stall_thread_where", "stall_threads", "stall_threads_keep", "stall_threads_now",
    "stall_wait", "data_wait_own_ms", "eval_wait_s", "eval_wait_share", "eval_batches", "eval_batch_ms", "run_steps_s",
    "steady_steps", "steady_batches", "step_batches", "step_mean_ms", "step_ms", "suggested_num_workers", "suggested_prefetch_factor",
    "train_ms", "training_cores", "worker_cpu_ms", "worker_memory_basis", "worker_memory_mib", "worker_runq_ms", "worker_start_method",
    "worker_starved_ms", "workers_limit", "workers_memory_cap", "workers_respawn_each_epoch", *MAC_RESPAWN_FACTS,
    *REASON_FACTS, *FIGURES_FACTS, *PLACE_FACTS, *BATCH_INDEX_FACTS,
)
"""Every fact the ``dataloader`` analyzer may return (declared: no other analyzer may provide one)."""


@analyzer("dataloader", provides=DATALOADER_FACTS)
def dataloader_facts(session: Session) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    steps = session.steps
    steady = steps.steady
    med = steps.quantile(0.5)
    facts["steady_steps"] = steps.steady_count
    facts["steady_batches"] = steps.steady_batches
    facts["last_step"] = steps.last_index if steps.last_index >= 0 else None
    facts["step_ms"] = rounded(med * 1000.0 if med is not None else None, 3)
    facts["data_wait_share"] = rounded(steps.data_wait_share())
    # None where unknown (the CPU is never "busy elsewhere"): rules test it with `is None`
    facts["device_idle_share_while_waiting"] = None
    if is_asynchronous(session):
        seen = steps.idle_waits + steps.busy_waits
        facts["device_idle_share_while_waiting"] = rounded(steps.idle_waits / seen) if seen else None
    loader = stalled_loader(session)
    facts["dataloader_count"] = len(session.dataloaders)
    workers = _opt_int(loader.get("num_workers")) if loader else None
    respawn, restarts = _respawn(session, loader, workers) if loader else ({}, set())
    # the loading wait proper: epoch starts that waited for restarted workers are
    # worker-respawn's business, and more workers would not help them
    # ... and steps whose op accounting ran: its first run imports modules inside
    # whatever the step does first, often the fetch, which is no wait for data
    skip = restarts | session.ops.sampled
    dur, wait, n = _steady_sums(session, skip)
    share = min(1.0, wait / dur) if dur > 0 else None
    kept = [p for p in steady if p.i not in skip]
    facts["loading_wait_share"] = rounded(share)
    facts["loading_wait_share_low"] = rounded(_low_share(kept, steps))
    facts["data_wait_ms"] = rounded(wait / n * 1000.0, 3) if n else None
    facts["compute_ms"] = rounded(max(0.0, dur - wait) / n * 1000.0, 3) if n else None
    facts["step_mean_ms"] = rounded(dur / n * 1000.0, 3) if n else None
    facts["first_stall_step"] = _first_stall(kept)
    if loader is None:
        return facts
    facts["num_workers"] = workers
    facts["persistent_workers"] = bool(loader.get("persistent_workers"))
    facts["prefetch_factor"] = _opt_int(loader.get("prefetch_factor"))
    facts["pin_memory"] = bool(loader.get("pin_memory"))
    facts["batch_size"] = _opt_int(loader.get("batch_size"))
    facts["worker_start_method"] = start_method(session, loader)
    facts["batch_size_arg"] = str(facts["batch_size"])  # `batch_size=None` is a valid setting
    form = loader.get("batch_form")  # the handoff fix's snippet indexes batches of this shape
    facts["batch_form"] = form if form in ("pair", "dict", "mixed") else "unknown"
    facts["loader_settings"] = _settings(loader, workers)
    facts.update(_profile(session, loader, workers or 0, kept))
    facts["suggested_prefetch_factor"] = max(4, (facts["prefetch_factor"] or 2) * 2)
    respawn = _less_refills(respawn, _refills(facts, len(restarts)), len(restarts), session.steps.total_dur)
    facts.update(respawn)
    facts.update(mac_respawn(session, respawn))  # what the restarts would cost where workers spawn (a Mac)
    # several loaders: the steps holding the restarts are not told apart (restarts empty),
    # so the steady wait holds their cost, which the rest of the waiting is weighed without
    cost = num(facts.get("respawn_cost_s")) or 0.0
    if _startup_bound(facts, wait if restarts else max(0.0, wait - cost)):
        spawned = facts.get("worker_start_method") in STARTUP_METHODS
        apart = isinstance(facts.get("worker_startup_cpu_s"), float) and facts["worker_startup_cpu_s"] > 0
        # the workers' CPU is measured between two memory samples inside the steady steps: a
        # steady stretch shorter than that (4 short epochs on a quiet machine) has no CPU
        # figure, and then nothing is said about what the workers' CPU time holds
        cpu = facts.get("worker_cpu_ms") is not None
        facts.update(STARTUP_ADVICE, suggested_num_workers=workers, num_workers_helps=False,
                     restart_how="spawn" if spawned else "fork",
                     # the workers' CPU per batch holds their start-ups unless measured apart
                     restart_cpu="apart" if apart else "in" if cpu else "none",
                     figures_loading="startup_apart" if apart else "startup" if cpu else "unknown")
    side = facts.get("reason_trains") == "side" or read_aside(session, loader)
    facts.update(place_facts(session, loader, _opt_int(facts.get("suggested_num_workers")), workers or 0,
                             facts["batch_size_arg"], facts["prefetch_factor"], side))
    # whose time it is, for the titles: a side loader's waits are an evaluation's between the
    # steps (or a probe set's), not a training step waiting for its batch
    facts["stall_subject"] = facts["stall_wait"] = "evaluation" if side else "training"
    split = shares(session, loader)
    if not side and split is not None and split[0] < OWN_WAIT_SAID and facts.get("data_wait_ms") is not None:
        # the steps waited for other loaders' batches too (an evaluation pass inside them):
        # how much of the wait was this loader's
        facts["stall_wait"] = "training_shared"
        facts["data_wait_own_ms"] = rounded(facts["data_wait_ms"] * split[0], 3)
    if side:
        facts.update(_evaluation_wait(session, loader))
        if session.steps.mode not in TRAINING_SIGNALS:
            # no training step at all (Trainer.evaluate() alone): its batches are the steps,
            # there are no training steps for the evaluation to sit between
            facts["stall_wait"] = "evaluation_only"
    if facts.get("loader_bound") == "ipc":  # dataloader-batch-indexing's snippet: the script's line, its order
        facts.update(batch_index_facts(loader, facts["batch_size_arg"]))
    if facts.get("loader_bound") == "sampler":
        facts["loader_change"] = "none"  # the fix is the sampler's code, not the loader's arguments
    return facts


def _evaluation_wait(session: Session, loader: DataLoaderFields) -> dict[str, Any]:
    """What the evaluation spent waiting for a side loader's batches: its timed fetches'
    seconds (each iterator's first batch is left out: probe/loader_sites.py), their count
    and their share of the steps' time. Training steps never wait for an evaluation batch:
    the time is the evaluation passes between them, so the evidence says that, not "on
    average a step waited 10.2 ms for its batch" (all the loaders' waits over the steps)."""
    counted, fetch_s = in_steps(loader)  # an evaluation after the training took no step's time
    fetches = int(counted)
    total = session.steps.total_dur
    if not fetches or fetch_s <= 0 or total <= 0:
        return {}
    return {"eval_wait_s": rounded(fetch_s, 3), "eval_batches": fetches, "eval_batch_ms": rounded(fetch_s / fetches * 1000.0, 3),
            "eval_wait_share": rounded(min(1.0, fetch_s / total)), "run_steps_s": rounded(total, 3)}


STARTUP_ADVICE: dict[str, Any] = {"stall_advice": "restarts", "num_workers_reason": ["restarts"],
                                  "figures_loading": "startup", "stall_threads": "none",
                                  "restart_how": "spawn", "restart_cpu": "in"}
"""The codes a stall dominated by worker start-up is worded with (rules/dataloader-stall.yaml)."""


def _refills(facts: dict[str, Any], starts: int) -> float:
    """Seconds of the epoch starts' extra waiting that persistent workers would wait too.

    Workers kept alive do not build the next epoch's batches ahead: ``iter()`` on the
    loader resumes them and only then puts the first indices (``_MultiProcessingDataLoaderIter
    ._reset``, torch/utils/data/dataloader.py), so every epoch's first batch waits for one
    worker to build it, restarted or not. A loader of 10 ms of CPU a sample (80 ms a batch,
    forked workers starting in 40 ms) waited ~190 ms at each epoch start; counted whole as
    start-up, it read as restart-bound in 1 run of 2 (the steady wait beside it was about
    as large) and was told persistent workers instead of its CPU advice. Counted only where
    a batch's CPU is known without the start-ups in it (forked workers, whose start-up is
    measured apart, probe/worker_startup.py); spawned workers' batch CPU holds their
    start-ups and is not subtracted (their start-up, a second or more, dwarfs it)."""
    apart = isinstance(facts.get("worker_startup_cpu_s"), float) and facts["worker_startup_cpu_s"] > 0
    batch_ms = num(facts.get("worker_cpu_ms"))
    if not apart or batch_ms is None or starts <= 0:
        return 0.0
    return starts * batch_ms / 1000.0


def _less_refills(respawn: dict[str, Any], refills: float, starts: int, total_s: float) -> dict[str, Any]:
    """The restarts' figures without the first batches' build (``refills`` seconds over
    ``starts`` epoch starts, :func:`_refills`): what keeping the workers alive would save.
    Counted whole, a forked loader of 80 ms batches was told "the first batch of each new
    epoch waited 190 ms longer" and persistent workers, which leave ~90 of those ms; it said
    the restarts cost 38% of the step time. ``respawn_basis`` says which the texts show."""
    cost = num(respawn.get("respawn_cost_s"))
    if refills <= 0 or starts <= 0 or cost is None:
        return dict(respawn, respawn_basis="whole") if cost is not None else respawn
    refill = refills / starts
    net = max(0.0, cost - refills)
    wait_ms = max(0.0, (num(respawn.get("respawn_wait_ms")) or 0.0) - refill * 1000.0)
    return dict(respawn, respawn_cost_s=rounded(net, 4), respawn_wait_ms=rounded(wait_ms, 3),
                respawn_share=rounded(net / total_s) if total_s > 0 else None,
                respawn_refill_ms=rounded(refill * 1000.0, 3), respawn_basis="less_refill")


def _startup_bound(facts: dict[str, Any], steady_wait: float) -> bool:
    """The loader's waiting is its workers' start-up, not its loading: non-persistent
    workers of a loader built once whose epoch starts cost more than all the other waiting
    of the steady steps.

    Such a loader looked CPU-bound: the workers' CPU time between the samples includes each
    new interpreter's import of torch and the script, so a loader with cheap batches read as
    "1000 ms of CPU work a batch" and was told it "needs more CPU than this machine has",
    while 93% of its time was waiting. The batches an epoch's first ones hold up wait for the
    start-up too (the epoch's second batch comes from a second new worker). Forked workers
    start in milliseconds on a quiet machine, but not on a busy one: 8 forked workers of a
    loader that sleeps 32 ms a batch, started again for 2 batches each per epoch beside 2 busy
    programs, held each epoch's first batch 774 ms, three times the other steps' waiting, and
    were told "num_workers=2 at most" (slower: 1.40 s against 1.14 s). A loader whose loading
    is the wait (CPU work, 10 ms a sample) waits longer in its steady steps than its epoch
    starts cost beyond the first batch's build that persistent workers wait too (the cost
    is net of it: :func:`_less_refills`): advised as before, whatever the start method."""
    if facts.get("respawn_why") != "persistent":
        return False
    cost = facts.get("respawn_cost_s")
    return isinstance(cost, (int, float)) and cost > 0 and cost >= steady_wait


def _settings(loader: DataLoaderFields, workers: int | None) -> str:
    """The loader's relevant arguments as written in code (prefetch only applies with workers)."""
    parts = [f"num_workers={workers}"]
    if workers:
        parts.append(f"prefetch_factor={loader.get('prefetch_factor')}")
        parts.append(f"persistent_workers={bool(loader.get('persistent_workers'))}")
    parts.append(f"pin_memory={bool(loader.get('pin_memory'))}")
    return ", ".join(parts)


def _steady_sums(session: Session, skip: set[int]) -> tuple[float, float, int]:
    """Steady (duration, wait, count) without the steps in ``skip``."""
    steps = session.steps
    dur, wait = steps.steady_sums()
    n = steps.steady_count
    for p in steps.steady:
        if p.i in skip:
            dur -= p.dur
            wait -= p.wait
            n -= 1
    return max(0.0, dur), max(0.0, wait), n


def _first_stall(steady: list[StepPoint]) -> int | None:
    for p in steady:
        if p.dur > 0 and p.wait >= STALL_STEP_SHARE * p.dur:
            return p.i
    return None


def _low_share(kept: list[StepPoint], steps: Any) -> float | None:
    """The lower of the wait shares of the two halves of the steady steps.

    The rules ask both halves to clear a threshold, so a run whose wait hovers around it
    (one half above, one below) stays quiet instead of warning on one run and not the next.
    """
    if len(kept) < 4:
        return None
    half = len(kept) // 2
    first, second = kept[:half], kept[half:]
    d1, w1 = sum(p.dur for p in first), sum(p.wait for p in first)
    d2 = sum(p.dur for p in second) + steps.late_dur
    w2 = sum(p.wait for p in second) + steps.late_wait
    if d1 <= 0 or d2 <= 0:
        return None
    return float(min(w1 / d1, w2 / d2))


def _profile(session: Session, loader: DataLoaderFields, workers: int, kept: list[StepPoint]) -> dict[str, Any]:
    """How the loader spends a batch, and the suggestion that follows (see the modules)."""
    fig = loader_profile.measure(session, kept, late=True)
    fig.batch_tensors = _opt_int(loader.get("batch_tensors"))
    all_per_step = fig.batches / fig.steps if fig.steps else None  # every loader's batches a step
    split = shares(session, loader)
    other_loaders = None
    if split is not None:
        # several loaders: this one's part of the wait and of the batches, so its own
        # figures (its batch's load time, its batches per step) go into the finding; the
        # others' part of the wait is neither this loader's nor the training's compute
        wait_share, batch_share = split
        own_batches = fig.batches * batch_share
        if fig.steps and fig.batches > own_batches:
            other_loaders = (own_batches / fig.steps, fig.wait * (1.0 - wait_share) / (fig.batches - own_batches))
        fig.others_wait = fig.wait * (1.0 - wait_share)
        fig.wait *= wait_share
        fig.wait_cpu = fig.wait_cpu * wait_share if fig.wait_cpu is not None else None
        fig.wait_runq = fig.wait_runq * wait_share if fig.wait_runq is not None else None
        fig.batches = max(1, round(fig.batches * batch_share))
    loads = step_loads(kept, workers, split[0] if split is not None else 1.0, other_loaders)
    spread, average, middle = step_ratios(loads), steady_ratio(loads), median_step(loads)
    dataset = loader.get("dataset")
    batch_size = _opt_int(loader.get("batch_size"))
    cores, what = compute_cores(session.env)
    train = fig.train_per_batch(session.device_kind == "cpu")
    per_step = fig.batches / fig.steps if fig.steps else None  # this loader's batches a step
    # read between the steps (the script's own evaluation pass): a side loader however many
    # batches a step it comes to, as a framework's evaluation loader
    aside = read_aside(session, loader)
    turns = split is not None and not aside and in_turns(per_step, all_per_step)
    consume = side_consume(loader, per_step, aside) if split is not None and not turns else None
    if consume is not None:
        # a loader served in a few steps only (evaluation every N steps): the steps'
        # compute and ratios are the other loader's; its own batches are consumed this fast
        train, spread, average, middle = consume, None, None, None
    elif turns:
        # the steps take turns between the loaders: half of them wait for this one and half
        # do not, a spread of the loop's making, not loading "in bursts"
        spread, average, middle = None, None, None
    training_cores = fig.training_cores(workers)
    measured = others_busy(session)  # other programs' cores during the run: not free for workers
    others = measured[0] if measured is not None else None
    free = free_cores(cores, training_cores, others)[0]
    bound = loader_profile.classify(fig, workers, dataset if isinstance(dataset, str) else None, batch_size,
                                    train, free)
    sampler = loader_profile.sampler_bound(loader)
    if sampler is not None and bound in ("waiting", "cpu", "unknown", "handoff", "ipc"):
        # the training process draws the indices whatever the workers do: their sizing
        # (waiting, cpu) would be for time they cannot take over, and a per-sample cost
        # (ipc, handoff) is not where the time went. A wait for a busy CPU (contention)
        # keeps its own advice: the draws' wall time is then the queue's too
        bound = "sampler"
    memory = session.memory
    first = memory.first
    available = first.sys_available if first is not None else None
    worker_bytes = None
    rss_children = memory.peak.get("rss_children")
    if workers and rss_children:
        worker_bytes = rss_children // workers
    logical = _opt_int(session.env.get("cores_logical"))
    length = _opt_int(loader.get("len"))
    side_steps = _steps_per_pass(loader, length, fig.steps) if consume is not None else None
    out = {"loader_bound": bound, "batches_per_step": rounded(per_step, 3), "side_steps_per_pass": rounded(side_steps, 1),
           "worker_startup_cpu_s": rounded(fig.workers_startup, 4) if workers else None,
           # the evidence's "waited ... for its batch", or "for its 4 batches" (accumulation)
           "step_batches": "several" if per_step is not None and per_step >= 1.5 else "one"}
    # the fix's workers are persistent (loader_place adds persistent_workers=True, and try
    # and patch set it too): they start once, so each start serves all the run's batches
    # (at least an epoch's: a profiled run may be shorter than the training). Sized for
    # workers restarted at every epoch, a 10-batch epoch got 3 workers where 7 keep up.
    total = session.steps.total_batches
    per_start = max(length, total) if length else total
    rebuilt = rebuilt_count(loader)
    starts = restarts(session, loader)
    if starts == "trainer_eval":  # kept by the Trainer with the fix's persistent workers: all its passes
        per_start = length * rebuilt if length else total
    elif rebuilt > 1:  # built anew every epoch: each construction starts its workers for its own batches
        per_start = length or max(1, total // rebuilt)
    method = start_method(session, {**loader, "num_workers": max(1, workers)})
    advice: dict[str, Any] = advise(fig, bound, workers, train, training_cores, cores, what, batch_size, available,
                                    worker_bytes, logical, per_start, method, spread, average, consume,
                                    length, sampler, others, middle)  # fmt: skip
    if (loader.get("iterable") is True and loader.get("iterable_split") is not True and advice["num_workers_helps"]
            and advice["suggested_num_workers"] > 1):
        # an IterableDataset is copied into each worker, which then yields the whole stream:
        # more than one worker repeats every sample unless __iter__ splits it
        advice["num_workers_reason"] = [*advice["num_workers_reason"], "iterable"]
    out.update(advice)
    if "reason_sampler" in advice and sampler is not None:
        out["reason_sampler_at"] = sampler_place(session, loader, sampler[2])
    out.update(threads_beside_workers(session, bound, advice, cores))
    return out


def sampler_place(session: Session, loader: DataLoaderFields, kind: str) -> str:
    """``file:line`` of the ``__iter__`` of the slow sampler's class (``kind``: the DataLoader
    argument it came in), where the probe read it (a class of the script's own:
    probe/loader_config.py), else ``none`` (the texts then name the class only)."""
    at = loader.get("batch_sampler_at" if kind == "batch_sampler" else "sampler_at")
    if not isinstance(at, list) or len(at) != 2 or not isinstance(at[0], str) or not isinstance(at[1], int):
        return "none"
    return f"{short_path(at[0], session.run.get('cwd'))}:{at[1]}"


def threads_beside_workers(session: Session, bound: str, advice: dict[str, Any], cores: int | None) -> dict[str, Any]:
    """``stall_threads``: whether the workers a loader that computes is given need torch to
    run fewer intra-op threads (``cut``, with the thread count and the script's line that
    sets it, as thread-oversubscription words it) or not (``none``).

    A script that runs as many threads as there are cores (``torch.set_num_threads(2)`` on 2
    cores) and gets 2 busy workers beside them: the threads wait for each other while the
    workers hold the cores (OpenMP threads spin), and the workers gained nothing (10.45 s
    against 10.75 s over 4 runs each); with torch at 1 thread the same 2 workers were 18%
    faster (8.58 s). Waiting workers hold no core, so only ``cpu`` loading asks."""
    n = advice.get("suggested_num_workers")
    if bound != "cpu" or not advice.get("num_workers_helps") or not isinstance(n, int) or n < 1 or not cores:
        return {"stall_threads": "none"}
    threads = torch_threads(session)
    if not threads or threads < 2 or threads + n <= cores:
        return {"stall_threads": "none"}
    keep = max(1, cores - n)
    if keep >= threads:
        return {"stall_threads": "none"}
    place = thread_fix_place(session, keep)
    return {"stall_threads": "cut", "stall_threads_now": int(threads), "stall_threads_keep": keep,
            "stall_thread_code": place["thread_fix_code"], "stall_thread_where": place["thread_fix_where"],
            "stall_thread_place": place["thread_set_place"]}


def _steps_per_pass(loader: DataLoaderFields, length: int | None, steps: int) -> float | None:
    """Steps from one pass over a side loader to the next: what a trial of its fix must span
    to time it at all (experiment/candidates.py). Its timed batches leave out each
    iterator's first: one per pass, or one in all where persistent workers keep the iterator."""
    timed = int(in_steps(loader)[0])
    if not length or not timed or not steps:
        return None
    if loader.get("persistent_workers"):
        passes = (timed + 1) / length
    elif length > 1:
        passes = timed / (length - 1)
    else:
        return None
    return steps / passes if passes >= 1 else None


OWN_WAIT_SAID = 0.95
"""Under this share of the steps' wait, the evidence says how much of it was the stalled
loader's: a Lightning run with a slow validation set inside fit waited 74.9 ms a step,
36.9 ms of it for the training batches (issue 28)."""

SIDE_LOADER = 0.5
"""A loader whose batches come in fewer than half the steps (one every two or more) is a
side loader: evaluation, a probe set. Its batches are not what paces the steps."""


IN_TURNS = 0.9
"""Batches a step, of all the loaders together, from which the steps are fed by loaders."""


def in_turns(per_step: float | None, all_per_step: float | None) -> bool:
    """Whether the loaders feed the steps in turns (multi-task training: task A's loader on
    even steps, task B's on odd ones, or round-robin over three): together they give a
    batch to (nearly) every step, and the others without this one do not. Each serves
    under half the steps, yet none is a side loader: its batch is the batch its steps train
    on. A loop alternating a fast and a slow task's loader was told "Evaluation waits for its
    DataLoader ... time of the evaluation passes between training steps", of a loader that
    held back every other training step. An evaluation loader beside a training loader that
    feeds every step (``others >= IN_TURNS``) stays a side loader."""
    if per_step is None or all_per_step is None:
        return False
    return all_per_step >= IN_TURNS and all_per_step - per_step < IN_TURNS


def side_consume(loader: DataLoaderFields, per_step: float | None, evaluation: bool = False) -> float | None:
    """Seconds the script spends on each batch of a side loader (between its arrival and
    the next request of the same iterator: probe/loader_sites.py), or None where the loader
    serves most steps (``per_step``: its batches a step) or the gaps were not recorded
    (fewer than 3). ``evaluation``: a framework's evaluation hook built it (loader_role.py),
    a side loader however many of its batches a step reads (a Trainer evaluating 10
    batches every 10 steps reads one a step)."""
    consumes, consume_s = _opt_int(loader.get("consumes")), num(loader.get("consume_s"))
    if not consumes or consumes < 3 or consume_s is None:
        return None
    if not evaluation and (per_step is None or per_step >= SIDE_LOADER):
        return None
    return max(consume_s / consumes, 1e-6)


def _respawn(
    session: Session, loader: DataLoaderFields, workers: int | None
) -> tuple[dict[str, Any], set[int]]:
    """Workers re-started at every epoch: measurable once a loader was iterated twice.

    Every batch the probe counted came from some loader; more batches than all loaders
    hold together means some loader was iterated again, which without
    ``persistent_workers`` starts its workers again. Returns the facts and the steps
    that began an epoch with restarted workers (none where the run reads several loaders:
    each loader's restarts are then measured from its own passes' first batches,
    loader_restarts.py, and the steps holding them are not told apart).
    """
    if not workers or loader.get("persistent_workers"):
        return {}, set()
    lengths = [_opt_int(d.get("len")) for d in session.dataloaders.values()]
    if any(not n for n in lengths):
        return {}, set()
    total = session.steps.total_batches
    capacity = sum(n for n in lengths if n)
    out: dict[str, Any] = {"workers_respawn_each_epoch": total > capacity}
    length = _opt_int(loader.get("len"))
    if len(session.dataloaders) != 1:
        # each loader's restarts from its own passes' first batches (spawned workers)
        out.update(several_loaders(session, loader))
        return out, set()
    if not length or total <= capacity:
        return out, set()
    out["epochs_seen"] = -(-total // length)
    firsts, others = _epoch_starts(session, length)
    if not firsts or not others:
        return out, set()
    # worker start-up shows in the whole step (iter() forks/spawns, then the first batch
    # waits for the new worker), so the cost is the extra duration of those steps
    base = median(p.dur for p in others)
    extra = [max(0.0, p.dur - base) for p in firsts]
    cost = sum(extra)
    total_s = session.steps.total_dur
    out["respawn_wait_ms"] = rounded(median(extra) * 1000.0, 3)
    out["respawn_cost_s"] = rounded(cost, 4)
    out["respawn_share"] = rounded(cost / total_s) if total_s > 0 else None
    out["respawn_first_step"] = firsts[0].i
    # a loader built anew every epoch starts new workers whatever persistent_workers says
    out["respawn_why"] = out["respawn_fix"] = "rebuilt" if rebuilt_count(loader) > 1 else "persistent"  # codes
    line = respawn_line(session, loader) if out["respawn_fix"] == "persistent" else None
    if line is not None:
        out.update(respawn_fix="persistent_line", respawn_place=line[0], respawn_code=line[1])
    return out, {p.i for p in firsts}


def _epoch_starts(session: Session, length: int) -> tuple[list[StepPoint], list[StepPoint]]:
    """Steps holding the first batch of a later epoch, and the other steady steps."""
    steps = session.steps
    firsts: list[StepPoint] = []
    others: list[StepPoint] = []
    consumed = 0
    for p in steps.early:  # one by one from the first step: the batch count stays exact
        last = consumed + p.batches - 1
        if p.batches > 0 and last >= length and (last // length) * length >= consumed:
            firsts.append(p)
        elif p.i >= steps.warmup:
            others.append(p)
        consumed += p.batches
    return firsts, others


def _opt_int(v: Any) -> int | None:
    f = num(v)
    return None if f is None else int(f)
