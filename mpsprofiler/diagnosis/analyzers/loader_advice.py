"""The ``num_workers`` to suggest for a classified loader, and why, as codes and figures.

The reason reaches the user as sentences with the measured figures ("each batch takes
84 ms to load and 3 ms to train on ..."), but those sentences live in the rule files
(``rules/dataloader-stall.yaml``, ``phrases:`` of ``num_workers_reason``), so a rule author
changes the advice without Python. Here the reason is a list of codes (the main reason,
then the clauses that apply: the bound that cut the number, the rounding, the range, ...)
and ``reason_*`` facts holding the figures those sentences quote, unrounded.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from .loader_profile import HEADROOM, MAX_WORKERS, MEMORY_FOR_WORKERS, WORKER_MIB_DEFAULT, LoaderFigures

MIB = 1024**2
START_MS = {"fork": 50.0, "forkserver": 1500.0, "spawn": 1500.0}
"""What starting one worker costs the run: a fork of a process that imported torch takes
tens of milliseconds (50 ms assumed, more on a busy machine); spawn (macOS, Windows) and
forkserver start a new interpreter that imports torch and the script, a second or more."""
CORE_KINDS = ("performance", "physical", "logical", "unknown")
""":func:`~.common.compute_cores`' kinds of core: names the rules word (``reason_core_kind``)."""
STALL_ADVICE_CODES = ("index_batches", "handoff", "busy_cpus", "try_workers", "needs_cpu", "load_faster", "restarts", "sampler")
"""Every code ``stall_advice`` (the few words after a stall finding's title) may hold."""
FIGURES_CODES = ("workers", "in_process", "sampler")
"""Every code ``loader_figures`` (the evidence's sentence of measured figures) may hold;
None when the load time is not known (the sentence is left out)."""
FIGURES_FACTS = ("figures_batch_size", "figures_busy", "figures_cpu_ms", "figures_loading", "figures_runq_ms",
                 "figures_workers")
"""The figures and names the sentence of ``loader_figures`` quotes besides ``load_ms``
(declared by the ``dataloader`` analyzer); an optional clause's fact is the name
``unknown``/``none`` when it is left out (the rule files' phrases word it as nothing)."""
REASON_CODES = ("ipc_workers", "ipc", "handoff", "contention", "cpu_fits", "cpu_short", "waiting", "unmeasured",
                "max_workers", "memory", "startup", "worker_cpu", "rounded", "span", "enough", "unmeasured_try",
                "over_cpus", "bursts", "iterable", "restarts", "sampler")
"""Every code ``num_workers_reason`` may hold: a main reason first, then its clauses
(``iterable`` is added by the ``dataloader`` analyzer, which knows the dataset's kind;
``restarts`` replaces the reason there where the workers' start-up is the wait)."""
OFF_CPU_KEEP = 2.0
"""A worker that waits (sleep, I/O: neither computing nor queued for a core) at least this
many times its CPU work per batch spends most of a batch off the CPU: a loader short of
cores keeps such workers rather than being cut to the cores (:func:`advise`, ``cpu_short``)."""
LIMIT_ORDER = ("batches", "max_workers", "memory", "worker_cpu", "startup")
"""Of two bounds on workers that allow the same number, the one named: this order."""
REASON_FACTS = (
    "reason_at_most", "reason_available_gib", "reason_batch_size", "reason_batch_tensors", "reason_batches_per_start",
    "reason_best_ms", "reason_busy", "reason_floor", "reason_core_kind", "reason_core_kind_one", "reason_cores", "reason_cpu_ms",
    "reason_cpu_part",
    "reason_demand", "reason_fetch_cpu", "reason_fetch_ms", "reason_free", "reason_free_cores", "reason_free_tail",
    "reason_others",
    "reason_handoff_cpu_ms", "reason_handoff_ms", "reason_handoff_saving", "reason_high", "reason_index_ms",
    "reason_kept_waiting", "reason_limit_n",
    "reason_load_cpu_ms", "reason_load_ms", "reason_logical", "reason_low", "reason_median_demand",
    "reason_median_load_ms", "reason_median_step", "reason_median_train_ms", "reason_needed",
    "reason_needed_keep", "reason_off_cpu_ms",
    "reason_queue_part", "reason_queued_ms", "reason_ratio", "reason_receive_ms", "reason_sample_us", "reason_sampler",
    "reason_sampler_at", "reason_sampler_kind", "reason_sampler_sketch", "reason_start_method",
    "reason_start_ms", "reason_step_ms", "reason_train_ms", "reason_train_on", "reason_trains",
    "reason_try_workers",
    "reason_training_cores", "reason_worker_mib", "reason_workers",
)
"""The figures and names the sentences of ``num_workers_reason`` quote (declared by the
``dataloader`` analyzer)."""


def advise(
    fig: LoaderFigures,
    bound: str,
    workers: int,
    train_s: float,
    training_cores: int,
    cores: int | None,
    what: str,
    batch_size: int | None,
    available: int | None,
    worker_bytes: int | None,
    logical: int | None,
    batches_per_start: int | None = None,
    start_method: str | None = None,
    spread: tuple[float, float, float] | None = None,
    average: float | None = None,
    consume: float | None = None,
    length: int | None = None,
    sampler: tuple[float, str, str] | None = None,
    others: float | None = None,
    middle: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """Facts for the rules: the suggestion, whether workers help, and the reason.

    ``spread`` is (median, lower quartile, upper quartile) of the steps' own load-to-compute
    ratio (see :func:`step_ratios`): a loader that waits is sized from the median step, not
    the mean (one slow read no longer moves the number), and the suggestion is rounded up
    to a power of two (:func:`stable_workers`), so runs of one script on a machine whose
    load varies get one number; when the quartiles call for different numbers, the reason
    states the range. ``average`` (:func:`steady_ratio`) sizes it instead where loading
    comes in bursts (``BURST`` times the median step's ratio): the reason says so.
    ``consume``: seconds the script spends per batch of a side loader (an evaluation
    loader, ``dataloader.side_consume``), which replaces the steps' compute; ``length``:
    the batches one pass gives, a bound on the workers that can have work. ``others``:
    cores' worth of CPU other programs used during the run (None: not measured), which
    the free cores leave out (:func:`free_cores`). ``sampler``:
    (seconds per batch drawing its indices, the sampler's class, ``batch_sampler`` or
    ``sampler``: which argument of the DataLoader it is), for a loader whose bound is
    ``sampler`` (:func:`~.loader_profile.sampler_bound`). ``middle``: (load, compute) seconds
    of the median step (:func:`median_step`): where the count is sized from the median
    step, the reason quotes its own figures beside the averages, so the ratio it prints
    times the compute it prints is the load it prints (a Fabric run read "It trains in
    9.6 ms, so 33 workers keep up (the median step loads 26.0 times as long as it trains",
    the 9.6 ms an average: 9.6 x 26 was no figure of the run).
    """
    out: dict[str, Any] = {}
    out["num_workers_range"] = None
    per = fig.per_batch
    train = train_s * 1000.0  # training per batch when not waiting, ms
    step = fig.dur / fig.steps * 1000.0 if fig.steps else 0.0
    fetch = fig.wait * per * 1000.0
    fetch_cpu = fig.wait_cpu * per * 1000.0 if fig.wait_cpu is not None else None
    worker_cpu = fig.worker_cpu_per_batch()
    if workers:
        load = workers * fig.dur * per * 1000.0  # one batch per worker per this many ms
        load_cpu = worker_cpu * 1000.0 if worker_cpu is not None else None
    else:
        load, load_cpu = fetch, fetch_cpu
    out["load_ms"] = _r(load)
    out["load_cpu_ms"] = _r(load_cpu)
    out["train_ms"] = _r(train)
    out["fetch_cpu_ms"] = _r(fetch_cpu)
    out["fetch_runq_ms"] = _r(fig.wait_runq * per * 1000.0 if fig.wait_runq is not None else None)
    out["worker_cpu_ms"] = _r(worker_cpu * 1000.0 if worker_cpu is not None else None)
    worker_runq = fig.worker_runq_per_batch()
    out["worker_runq_ms"] = _r(worker_runq * 1000.0 if worker_runq is not None else None)
    out["training_cores"] = training_cores
    free, seen = free_cores(cores, training_cores, others)
    out["cores_for_workers"] = cores
    out["cores_free_for_workers"] = seen  # as measured: 0 where other programs kept the cores busy
    out["cores_others_busy"] = _r(others, 2)
    out["machine_busy_share"] = _r(fig.machine_busy, 3)
    mib = (worker_bytes / MIB) if worker_bytes else float(WORKER_MIB_DEFAULT)
    cap = None
    if available:
        cap = max(1, int(MEMORY_FOR_WORKERS * available / (mib * MIB)))
    out["worker_memory_mib"] = round(mib)
    out["worker_memory_basis"] = _memory_basis(worker_bytes, start_method)
    out["workers_memory_cap"] = cap

    needed = None
    if train > 0 and load > 0:
        needed = max(1, math.ceil(load / train * HEADROOM))
    out["num_workers_needed"] = needed
    helps = True
    best = None
    split = fig.worker_wait_split(workers) if workers else None
    out["worker_starved_ms"] = _r(split[2] * 1000.0 if split is not None else None)
    kind = what if what in CORE_KINDS else "unknown"
    # what the script does with each batch: train on it, or (a side loader) use it
    use = "side" if consume is not None else "train"
    why: dict[str, Any] = {"reason_core_kind": kind, "reason_core_kind_one": kind, "reason_trains": use,
                           "reason_train_on": use,
                           # other programs' cores, said beside every count of free cores (the rule files' clause)
                           "reason_others": others if others is not None and others >= OTHERS_SAID else "none"}
    if bound == "ipc" and workers:
        target, helps = workers, False
        receive = split[1] * 1000.0 if split is not None else fetch_cpu or fetch
        codes = ["ipc_workers"]
        why.update(reason_workers=workers, reason_fetch_ms=fetch, reason_receive_ms=receive)
    elif bound == "ipc":
        target, helps = 0, False
        codes = ["ipc"]
        why.update(reason_batch_size=_known(batch_size), reason_fetch_ms=fetch, reason_train_ms=train,
                   reason_sample_us=(fetch_cpu or fetch) / max(1, batch_size or 1) * 1000.0)
    elif bound == "sampler" and sampler is not None:
        # the training process draws every batch's indices, with workers or without
        # (torch/utils/data/dataloader.py: _next_data and _try_put_index call _next_index):
        # the loader keeps the workers it has, and the fix is the sampler's
        target, helps = workers, False
        codes = ["sampler"]
        why.update(reason_fetch_ms=fetch, reason_index_ms=sampler[0] * 1000.0, reason_train_ms=train,
                   reason_sampler=sampler[1], reason_sampler_kind=sampler[2], reason_sampler_sketch=sampler[2],
                   reason_sampler_at="none")  # the place of its __iter__: the dataloader analyzer's
    elif bound == "handoff":
        target, helps = 0, False
        codes = ["handoff"]
        why.update(reason_fetch_ms=fetch, reason_fetch_cpu=_known(fetch_cpu), reason_train_ms=train,
                   reason_handoff_ms=fig.handoff_ms(), reason_handoff_cpu_ms=fig.handoff_ms(cpu=True),
                   reason_batch_tensors=_known(fig.batch_tensors), reason_handoff_saving=fig.handoff_saving())
    elif bound == "contention":
        target, helps = min(workers, free or workers), False
        queued = split[0] if split is not None else (fig.worker_runq_per_batch() if workers else (fig.wait_runq or 0.0) * per)
        if not workers and fig.wait_cpu is not None:
            # classify counts a fetch's time off its CPU as the machine's (queued, or for an
            # in-memory dataset descheduled): "0.0 ms waiting for a core" of a 19.7 ms fetch
            # (accelerate's loader over a TensorDataset beside 8 busy loops) said otherwise
            queued = max(queued or 0.0, (fig.wait - fig.wait_cpu) * per)
        codes = ["contention"]
        why.update(reason_fetch_ms=fetch, reason_queued_ms=(queued or 0.0) * 1000.0, reason_logical=logical,
                   reason_busy=fig.machine_busy if fig.machine_busy is not None and logical else "unknown")
    elif bound == "cpu" and load_cpu is not None:
        ratio = load_cpu / train if train > 0 else math.inf
        needed = max(1, math.ceil(ratio * HEADROOM)) if math.isfinite(ratio) else None
        out["num_workers_needed"] = needed
        why.update(reason_load_cpu_ms=load_cpu, reason_train_ms=train, reason_needed=needed, reason_needed_keep=needed)
        if needed is not None and free is not None and needed <= free:
            target = max(needed, workers + 1) if needed > workers else workers + 1
            target = min(target, free)
            codes = ["cpu_fits"]
            why.update(reason_free=seen, reason_cores=cores or 0)
        else:
            # every core, those other programs kept busy too: a worker is one more task the
            # scheduler shares a busy core with, so it takes its CPU from them (2 busy programs
            # on 2 cores: 18.4 s with num_workers=0, 10.2 s with 1)
            have = cores or 1
            # with every core busy a batch comes every (CPU to build + to train) / cores ms at
            # best; a worker builds one in `load` ms of its own (its waits for sleep or I/O
            # included), so this many reach it. One per free core fell short of it: a loader
            # that computes 158 ms and sleeps 70 ms a batch was told 1 worker on 2 cores
            # (1.2x measured) where 2 reach the best step (2.7x)
            best_batch = (load_cpu + train) / have
            reach = math.ceil(load / best_batch) if best_batch > 0 and load > 0 else 1
            target = min(max(workers, free or 1, reach), have)
            kept: int | str = "none"
            # a worker's batch beside its CPU work and its wait for a core (Linux): sleep, I/O
            off_cpu = max(0.0, load - load_cpu - (worker_runq or 0.0) * 1000.0)
            if target < workers and reach > target and off_cpu >= OFF_CPU_KEEP * load_cpu:
                # the cores bound workers that compute their whole batch; these spend most of
                # it waiting for something else than a core, and it is the workers, more of
                # them than cores, that overlap those waits: 8 workers of 48 ms a batch, 3.2 ms
                # of it CPU and 7.8 ms of it queued for a core, on 2 cores were told "2 at
                # most", which took the run from 1.0 s to 2.0 s (sweep s52 a04). Keep them.
                target, kept = workers, workers
            helps = target > workers
            best = best_batch * fig.batches / max(1, fig.steps)
            floor = "shown"
            if step > 0 and best >= step:
                # a "floor" above the step the run measured: the model does not hold for this
                # loader (its CPU figure includes time no batch needs), so neither the floor nor
                # a cut in workers drawn from it is said (8 restarted workers were told "2 at
                # most", which made the run slower)
                floor, target, helps, best = "none", workers, False, None
            out["best_step_ms"] = _r(best)
            codes = ["cpu_short"]
            why.update(reason_ratio=ratio, reason_cores=have, reason_training_cores=training_cores,
                       reason_best_ms=best if best is not None else "none", reason_step_ms=step,
                       reason_floor=floor, reason_at_most=target if floor == "shown" and kept == "none" else 0,
                       reason_kept_waiting=kept, reason_load_ms=load, reason_off_cpu_ms=off_cpu)
    else:
        # waiting (or not known): workers overlap the waits, cores do not bound them. The
        # training consumes a batch per wall-clock compute time here (on a busy machine
        # that is longer than its CPU time), so size from the wall time.
        wall = consume * 1000.0 if consume is not None else max(0.0, fig.dur - fig.wait - fig.others_wait) * per * 1000.0
        demand = load / wall if wall > 0 and load > 0 else None
        median = spread[0] if spread is not None else None
        bursts = median is not None and average is not None and average >= BURST * median
        if bursts:
            demand = average
        elif median is not None and demand is not None:
            # the median step's own ratio where it is known (with an even number of steps
            # the median is between two): the count, the ratio and the step's figures the
            # reason prints then agree
            demand = middle[0] / middle[1] if middle is not None and middle[1] > 0 else median
        if demand is not None:
            needed = max(1, math.ceil(demand * HEADROOM))
            out["num_workers_needed"] = needed
            train = wall
        start_ms = START_MS.get(start_method or "fork", START_MS["fork"])
        limits = _waiting_limits(load, load_cpu, free, mib, cap, available, batches_per_start, start_ms, length)
        out["workers_limit"] = min(limits)[0] if limits else None
        want = max(stable_workers(needed or 1), workers + 1)
        target, cut = want, None
        uncapped: int | None = None  # the count before the free cores cut it (CPU not measured)
        for limit, code in sorted(limits, key=lambda lc: (lc[0], LIMIT_ORDER.index(lc[1]))):
            if limit < target:
                target, cut = limit, code
        why.update(reason_load_ms=load, reason_train_ms=train, reason_needed=needed, reason_needed_keep=needed,
                   reason_worker_mib=mib, reason_available_gib=available / 1024**3 if available else None,
                   reason_start_ms=start_ms, reason_start_method=start_method or "fork",
                   reason_batches_per_start=batches_per_start, reason_load_cpu_ms=load_cpu,
                   reason_free_cores=seen, reason_free_tail=free or "none")
        if bound == "waiting":
            codes = ["waiting"]
            queue = _runq_ms(workers, out)
            why.update(reason_cpu_part=_known(load_cpu),
                       reason_queue_part=queue if isinstance(queue, float) and queue >= QUEUE_MS else "none",
                       reason_demand=demand if spread is not None and demand is not None and not bursts else "unknown")
        else:
            codes = ["unmeasured"]
            if free and target > free:
                uncapped = target
                target, cut = free, None
        if cut is not None:
            codes.append(cut)
        elif needed is not None and target == want > needed:
            # the title's number is the rounded one: say so, so evidence, fix and title agree
            codes.append("rounded")
        why["reason_limit_n"] = target
        if bursts:
            codes.append("bursts")
            why["reason_median_demand"] = median
        if middle is not None and not bursts and why.get("reason_demand", "unknown") != "unknown" and middle[1] > 0:
            # a batch's, as the average figures beside it (a step of 2 micro-batches read
            # "trains in 36.7 ms on average" beside the median step's "trained for 76.1 ms")
            step_batches = fig.batches / fig.steps if fig.steps and fig.batches else 1.0
            why.update(reason_median_step="shown", reason_median_load_ms=middle[0] / step_batches * 1000.0,
                       reason_median_train_ms=middle[1] / step_batches * 1000.0)
        else:
            why["reason_median_step"] = "none"
        span = _span(spread, workers, min(limits)[0] if limits else target) if bound == "waiting" and not bursts else None
        if span is not None:
            lo, hi = span
            out["num_workers_range"] = f"{lo}-{hi}"
            codes.append("span")
            why.update(reason_low=lo, reason_high=hi)
        if target <= workers:
            target, helps = workers, False
            if uncapped is not None and uncapped > workers:
                # only the free cores held it back, and they bound a loader that computes: one
                # that waits (a sleeping collate_fn) gains from more. With the workers' CPU not
                # measured (under two readings of it: a run of 2 s), "more would not pay" told
                # 2 workers of a 30 ms sleep a batch to keep 2, where 8 cut the run 3x: say how
                # to measure it instead
                codes.append("unmeasured_try")
                why["reason_try_workers"] = uncapped
            else:
                codes.append("enough")
            why["reason_workers"] = workers
            if codes[0] == "unmeasured":
                why["reason_free_tail"] = "none"  # no number to bound by the free cores: none is suggested
        elif target > cores_or(logical, cores):
            codes.append("over_cpus")
    out["suggested_num_workers"] = int(target)
    out.update(figures(bound, workers, out, batch_size))
    out["num_workers_helps"] = bool(helps and target > workers)
    out["num_workers_reason"] = codes
    out.update(why)
    out["stall_advice"] = _stall_advice(bound, helps and target > workers)
    return out


FREE_SLACK = 0.25
"""A core counts as free when the training and other programs left at least three
quarters of it idle during the run: 2 cores, the training on 1 and other programs on 1.4
leave none (the table said "1 free beside the training" there)."""
OTHERS_SAID = 0.25
"""Other programs' cores from which the reasons say them beside the free cores (under a
quarter core is the launcher's own sampling and the odd daemon)."""


def free_cores(cores: int | None, training_cores: int, others: float | None) -> tuple[int | None, int | None]:
    """(bound, seen): the cores beside the training, less what other programs used during
    the run (``others``, cores' worth; None: not measured, as if none).

    ``seen`` is what the run measured free (0 on a machine other programs kept busy): the
    words ("1 of its 2 cores free") and the table say it. ``bound`` is at least one: it caps
    the suggestion, and one worker always gets its turn on a core, shared or not."""
    if not cores:
        return None, None
    seen = max(0, math.floor(cores - training_cores - (others or 0.0) + FREE_SLACK))
    return max(1, seen), seen


def stable_workers(n: int) -> int:
    """``n`` rounded up to a power of two (1, 2, 4, 8...): a ratio of 2.6 one run and 3.1
    the next asks for 4 both times, instead of 3 and then 4."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _span(spread: tuple[float, float, float] | None, workers: int, limit: int) -> tuple[int, int] | None:
    """The worker counts the quartile steps call for, when they differ; capped at ``limit``
    (the lowest bound: what cuts the suggestion cuts the range too). A run on a machine
    whose load varies may land on either side of a power of two: the range says so."""
    if spread is None:
        return None
    _, q1, q3 = spread
    lo = min(max(stable_workers(max(1, math.ceil(q1 * HEADROOM))), workers + 1), limit)
    hi = min(stable_workers(max(1, math.ceil(q3 * HEADROOM))), limit)
    return (lo, hi) if lo < hi else None


BURST = 2.0
"""A loader whose load-to-compute ratio over its steps (the slowest 5% left out) is this
many times its median step's loads in bursts: most batches come at once, some wait long
(a shard, a file, a cache refill every few batches). Workers must keep up with the
average then, and the median step would ask for too few (a stream that sleeps 50 ms
every 4th batch: the median step asked for 1 worker, which left 92% of the time waiting)."""
TRIM = 0.05
"""Share of the slowest steps :func:`steady_ratio` leaves out: a one-off slow read (a
cold cache, the first file) does not make a loader bursty."""


def step_loads(points: list[Any], workers: int, wait_share: float = 1.0,
               others: tuple[float, float] | None = None) -> list[tuple[float, float]]:
    """(load, compute) seconds of each step that waited and computed, as :func:`advise`
    counts them over all steps: a loader's batch takes ``wait`` without workers,
    ``workers x dur`` with them (``wait_share``: this loader's part of the wait). The
    compute is the step's time less all of its waiting: a wait for another loader's batch
    (an evaluation pass inside the step) is no training. ``others``: (this loader's batches
    a step, the other loaders' wait per batch): a step's batches beyond this loader's are
    theirs, and so is that much of its wait (a step without any waited for this loader
    only); without it every step's wait is split by ``wait_share``."""
    pairs = []
    for p in points:
        if others is not None:
            own, other_wait = others
            wait = max(0.0, p.wait - min(p.wait, max(0.0, p.batches - own) * other_wait))
        else:
            wait = p.wait * wait_share
        wall = p.dur - p.wait
        if wall > 0 and p.dur > 0 and wait > 0:
            pairs.append((workers * p.dur if workers else wait, wall))
    return pairs


def steady_ratio(loads: list[tuple[float, float]]) -> float | None:
    """Load over compute summed over the steps (:func:`step_loads`), the slowest ``TRIM`` of
    them left out: the average a loader's workers must keep up with. None under 8 steps."""
    pairs = sorted(loads, key=lambda lw: lw[0] / lw[1])
    if len(pairs) < 8:
        return None
    kept = pairs[:len(pairs) - max(1, int(len(pairs) * TRIM))] if len(pairs) >= 20 else pairs
    wall = sum(w for _, w in kept)
    return sum(load for load, _ in kept) / wall if wall > 0 else None


def step_ratios(loads: list[tuple[float, float]]) -> tuple[float, float, float] | None:
    """(median, lower quartile, upper quartile) of each step's load time over its compute
    time (:func:`step_loads`). None under 8 steps."""
    ratios = [load / wall for load, wall in loads]
    if len(ratios) < 8:
        return None
    q = statistics.quantiles(ratios, n=4, method="inclusive")
    return statistics.median(ratios), q[0], q[2]


def median_step(loads: list[tuple[float, float]]) -> tuple[float, float] | None:
    """(load, compute) seconds of the step whose load-to-compute ratio is the median of
    :func:`step_ratios` (the lower of the middle two where their number is even). None
    under 8 steps."""
    if len(loads) < 8:
        return None
    return sorted(loads, key=lambda lw: lw[0] / lw[1])[(len(loads) - 1) // 2]


def _waiting_limits(
    load: float, load_cpu: float | None, free: int | None, mib: float, memory_cap: int | None,
    available: int | None, batches_per_start: int | None, start_ms: float, length: int | None = None,
) -> list[tuple[int, str]]:
    """Upper bounds on workers for a loader that waits, each with the code of its reason
    (``num_workers_reason``; the rule files word it).

    Cores do not bound waiting workers, but memory, start-up cost, the CPU they still use
    and plain process count do; the lowest bound that cuts the suggestion is explained.
    """
    limits: list[tuple[int, str]] = [(MAX_WORKERS, "max_workers")]
    if length and length >= 1:
        limits.append((length, "batches"))  # each worker builds whole batches of one pass
    if memory_cap is not None and available:
        limits.append((memory_cap, "memory"))
    if batches_per_start and load > 0:
        # n workers save about B * L * (1 - 1/n) of loading over B batches and cost n
        # start-ups of s each: past sqrt(B * L / s) one more costs more than it saves
        limits.append((max(1, math.ceil(math.sqrt(batches_per_start * load / start_ms))), "startup"))
    if load_cpu and free and load > load_cpu:
        # each waiting worker is on a CPU load_cpu of every load ms
        limits.append((max(1, math.floor(free * load / load_cpu)), "worker_cpu"))
    return limits


def cores_or(logical: int | None, cores: int | None) -> int:
    """The CPUs PyTorch compares num_workers with (logical ones), else the cores, else 1."""
    return logical or cores or 1


def _r(v: float | None, digits: int = 3) -> float | None:
    return None if v is None or not math.isfinite(v) else round(v, digits)


def _known(value: float | int | None) -> float | int | str:
    """A figure a reason quotes when measured, else the name ``unknown`` (its own words)."""
    return "unknown" if value is None else value


def _stall_advice(bound: str, more_workers: bool) -> str:
    """The code of the few words a stall finding's title ends with (``stall_advice``:
    ``try num_workers=N`` when more workers help; the rule files word each code).

    Where more workers would not pay, only a loader measured to compute (``cpu``) is told
    it needs more CPU; one that waits (reads at the 8-worker bound) or whose workers' CPU
    was not measured (a run too short for two samples of them) is told to make its loading
    faster, which is true of both."""
    by_bound = {"ipc": "index_batches", "handoff": "handoff", "contention": "busy_cpus", "sampler": "sampler"}
    if bound in by_bound:
        return by_bound[bound]
    if more_workers:
        return "try_workers"
    return "needs_cpu" if bound == "cpu" else "load_faster"


QUEUE_MS = 0.5
"""Run-queue time per batch worth naming apart from the other waiting (under it: noise)."""
CORE_WAIT_SHARE = 0.5
"""Loading that waits, with at least half its waiting spent ready to run but without a
free core (a busy machine), is worded as waiting for a core, not for I/O or sleep."""


CPU_OVER_BATCH = 2.0
"""A worker's CPU per batch past this many times its time per batch is not said as the
batch's CPU work (a worker uses one torch thread; a second one of a decoder, at most,
makes CPU time exceed wall time by a factor of 2)."""


def figures(bound: str, workers: int, out: dict[str, Any], batch_size: int | None) -> dict[str, Any]:
    """``loader_figures``, the evidence's sentence of measured figures, as a code (how the
    batches are loaded: ``workers`` or ``in_process``) and ``figures_*`` facts for its
    optional clauses (CPU part, run-queue wait, a busy machine, what the loading is); the
    rule files word them, so the evidence reads "Each of the 2 workers takes about 5.0 ms
    per batch, 3.0 ms of it CPU work. The loading is CPU work." """
    load, cpu, runq = out.get("load_ms"), out.get("load_cpu_ms"), out.get("fetch_runq_ms")
    busy = out.get("machine_busy_share")
    if workers and isinstance(cpu, (int, float)) and isinstance(load, (int, float)) and cpu > CPU_OVER_BATCH * load:
        # a worker's CPU per batch far over its time per batch is no batch's work: it is the
        # workers' start-up (spawn imports torch and the script anew), spread over few batches
        cpu = None
    return {
        # a loader bound by its sampler, with workers: what the training process spends drawing
        # indices, not "each worker takes ~46.6 ms per batch" (the workers' wait for the
        # indices, times their number: no cost of a batch's)
        "loader_figures": "sampler" if bound == "sampler" and workers else
                          None if load is None else ("workers" if workers else "in_process"),
        "figures_workers": workers,
        "figures_batch_size": _known(batch_size),
        "figures_cpu_ms": _known(cpu),
        "figures_runq_ms": runq if runq and not workers else "none",
        "figures_busy": busy if busy is not None and busy >= 0.9 else "none",
        "figures_loading": "ipc_workers" if bound == "ipc" and workers else
                           "waiting_core" if bound == "waiting" and _core_wait(workers, out) else bound,
    }


def _runq_ms(workers: int, out: dict[str, Any]) -> Any:
    """A batch's time waiting for a free core where it is built: the workers', or the
    training process's fetch."""
    return out.get("worker_runq_ms") if workers else out.get("fetch_runq_ms")


def _core_wait(workers: int, out: dict[str, Any]) -> bool:
    """Whether most of a waiting loader's waiting was for a free core (its run-queue time:
    "10.1 ms of it CPU work and 47.4 ms waiting for a free CPU core" of a 90.9 ms batch was
    said to be "mostly waiting (I/O, sleep)")."""
    load, cpu, runq = out.get("load_ms"), out.get("load_cpu_ms"), _runq_ms(workers, out)
    if not (isinstance(load, (int, float)) and isinstance(cpu, (int, float)) and isinstance(runq, (int, float))):
        return False
    waiting = max(0.0, float(load) - float(cpu))
    return waiting > 0 and float(runq) >= CORE_WAIT_SHARE * waiting


def _memory_basis(worker_bytes: int | None, start_method: str | None) -> str:
    """How the fix's memory figure per worker was had: measured from the run's workers
    (``measured``; ``measured_fork`` where they were forked, whose resident memory counts
    pages still shared with the training process, copy-on-write, so the figure is an upper
    bound), or the default for a loader that ran none (``estimate``: a spawned worker's
    import of torch and the script, not a figure of this run)."""
    if not worker_bytes:
        return "estimate"
    return "measured_fork" if start_method == "fork" else "measured"

