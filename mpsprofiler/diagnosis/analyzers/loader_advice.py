"""The ``num_workers`` to suggest for a classified loader, and why, in the user's terms.

The reason is a sentence with the measured figures ("each batch takes 84 ms to load and
3 ms to train on ..."): the rule files put it in the finding's fix, so it must read as
advice to a person, not as arithmetic about the profiler.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from ...units import agree
from .loader_profile import HEADROOM, MAX_WORKERS, MEMORY_FOR_WORKERS, WORKER_MIB_DEFAULT, LoaderFigures

MIB = 1024**2
START_MS = {"fork": 50.0, "forkserver": 1500.0, "spawn": 1500.0}
"""What starting one worker costs the run: a fork of a process that imported torch takes
tens of milliseconds (50 ms assumed, more on a busy machine); spawn (macOS, Windows) and
forkserver start a new interpreter that imports torch and the script, a second or more."""


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
) -> dict[str, Any]:
    """Facts for the rules: the suggestion, whether workers help, and the reason.

    ``spread`` is (median, lower quartile, upper quartile) of the steps' own load-to-compute
    ratio (see :func:`step_ratios`): a loader that waits is sized from the median step, not
    the mean (one slow read no longer moves the number), and the suggestion is rounded up
    to a power of two (:func:`stable_workers`), so runs of one script on a machine whose
    load varies get one number; when the quartiles call for different numbers, the reason
    states the range.
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
    free = max(1, cores - training_cores) if cores else None
    out["cores_for_workers"] = cores
    out["cores_free_for_workers"] = free
    out["machine_busy_share"] = _r(fig.machine_busy, 3)
    mib = (worker_bytes / MIB) if worker_bytes else float(WORKER_MIB_DEFAULT)
    cap = None
    if available:
        cap = max(1, int(MEMORY_FOR_WORKERS * available / (mib * MIB)))
    out["worker_memory_mib"] = round(mib)
    out["workers_memory_cap"] = cap

    needed = None
    if train > 0 and load > 0:
        needed = max(1, math.ceil(load / train * HEADROOM))
    out["num_workers_needed"] = needed
    helps = True
    best = None
    split = fig.worker_wait_split() if workers else None
    out["worker_starved_ms"] = _r(split[2] * 1000.0 if split is not None else None)
    if bound == "ipc" and workers:
        target, helps = workers, False
        receive = split[1] * 1000.0 if split is not None else fetch_cpu or fetch
        reason = (
            f"With {workers} workers the training waited {fetch:.2f} ms per batch, {receive:.2f} ms of it "
            f"taking the batch in from a worker process (unpickling it and mapping its shared memory); "
            f"the workers themselves kept up. More workers would not shorten that. If the samples are "
            "already in memory, index whole batches in the training process instead (num_workers=0)."
        )
    elif bound == "ipc":
        target, helps = 0, False
        sample_us = (fetch_cpu or fetch) / max(1, batch_size or 1) * 1000.0
        reason = (
            f"Each batch of {batch_size} samples takes {fetch:.2f} ms to put together from memory "
            f"({sample_us:.0f} µs per sample) and {train:.2f} ms to train on. That time is Python "
            "picking samples one at a time and stacking them, not loading: worker processes would "
            "add the cost of pickling and copying every batch. Index whole batches at once instead."
        )
    elif bound == "handoff":
        target, helps = 0, False
        handoff = fig.handoff_ms()
        tensors = fig.batch_tensors if fig.batch_tensors is not None else "about 2"
        reason = (
            f"Each batch takes {fetch:.2f} ms to load in the training process"
            + (f" ({fetch_cpu:.2f} ms of CPU work)" if fetch_cpu is not None else "")
            + f" and {train:.2f} ms to train on. A worker process would build batches in parallel, "
            f"but the training would still spend about {handoff:.1f} ms "
            f"({fig.handoff_ms(cpu=True):.1f} ms of CPU work) taking each one in from it (a batch of "
            f"{tensors} tensors: each tensor's shared memory is handed over separately), so workers "
            f"would save at most {fig.handoff_saving():.0%} of the time. Make each batch cheaper "
            "instead: samples prepared once before training, whole batches indexed at once (a "
            "BatchSampler with a dataset that takes a list of indices), fewer tensors per batch."
        )
    elif bound == "contention":
        target, helps = min(workers, free or workers), False
        queued = split[0] if split is not None else (fig.worker_runq_per_batch() if workers else (fig.wait_runq or 0.0) * per)
        busy = f"{fig.machine_busy:.0%} of its {logical} CPUs busy" if fig.machine_busy is not None and logical else "every core busy"
        reason = (
            f"Of the {fetch:.1f} ms each batch kept the training waiting, the loader spent about "
            f"{(queued or 0.0) * 1000.0:.1f} ms ready to run but waiting for a free CPU core: the "
            f"machine is busy ({busy}). More workers would only lengthen that queue. Close other "
            "busy programs, or give the training fewer threads (torch.set_num_threads)."
        )
    elif bound == "cpu" and load_cpu is not None:
        ratio = load_cpu / train if train > 0 else math.inf
        needed = max(1, math.ceil(ratio * HEADROOM)) if math.isfinite(ratio) else None
        out["num_workers_needed"] = needed
        if needed is not None and free is not None and needed <= free:
            target = max(needed, workers + 1) if needed > workers else workers + 1
            target = min(target, free)
            reason = (
                f"Each batch takes {load_cpu:.1f} ms of CPU work to build and {train:.1f} ms to train "
                f"on, so {_workers(needed)} {agree(needed, 'keeps', 'keep')} up ({load_cpu:.1f} / {train:.1f} with 25% to spare); "
                f"this machine has {free} of its {_cores(cores or 0, what)} free beside the training."
            )
        else:
            have = cores or 1
            target = min(max(workers, free or 1), have)
            helps = target > workers
            best = (load_cpu + train) / have * fig.batches / max(1, fig.steps)
            out["best_step_ms"] = _r(best)
            reason = (
                f"Each batch takes {load_cpu:.1f} ms of CPU work to build and {train:.1f} ms to train "
                f"on: hiding it needs about {ratio:.1f} cores for loading alone, but this machine has "
                f"{_cores(have, what)} and the training uses {training_cores}. Workers beyond the free cores "
                f"only take turns on them. Even with every core busy a step cannot get much below "
                f"{best:.1f} ms (it takes {step:.1f} ms now). "
                + (f"Use num_workers={target} at most, and make" if target else "Make")
                + " each batch cheaper to build: lighter transforms, decode once and cache the "
                "decoded samples, run augmentation on the device, or use a machine with more cores."
            )
    else:
        # waiting (or not known): workers overlap the waits, cores do not bound them. The
        # training consumes a batch per wall-clock compute time here (on a busy machine
        # that is longer than its CPU time), so size from the wall time.
        wall = max(0.0, fig.dur - fig.wait) * per * 1000.0
        demand = load / wall if wall > 0 and load > 0 else None
        if spread is not None and demand is not None:
            demand = spread[0]
        if demand is not None:
            needed = max(1, math.ceil(demand * HEADROOM))
            out["num_workers_needed"] = needed
            train = wall
        start_ms = START_MS.get(start_method or "fork", START_MS["fork"])
        limits = _waiting_limits(load, load_cpu, free, mib, cap, available, batches_per_start,
                                 start_ms, start_method or "fork", what)  # fmt: skip
        out["workers_limit"] = min(limits)[0] if limits else None
        want = max(stable_workers(needed or 1), workers + 1)
        target, why = want, None
        for limit, text in sorted(limits):
            if limit < target:
                target, why = limit, text
        if bound == "waiting":
            spent = (
                f"only {load_cpu:.1f} ms of it CPU work" if load_cpu is not None else "little of it CPU work"
            )
            keeps = (f"the median step loads {demand:.1f} times as long as it trains," if spread is not None
                     and demand is not None else f"{load:.1f} / {train:.1f}")
            reason = (
                f"Each batch takes {load:.1f} ms to load, {spent}: the rest is waiting (disk, "
                f"network, sleep or decoding that releases the GIL). It trains in {train:.1f} ms, so "
                f"{_workers(needed)} {agree(needed, 'keeps', 'keep')} up ({keeps} with 25% to spare). Waiting "
                "workers do not need a core each, so the number of cores does not limit them."
            )
        else:
            reason = (
                f"Each batch takes about {load:.1f} ms to load and {train:.1f} ms to train on, so "
                f"{_workers(needed)} would keep up if loading waits rather than computes; mpsprof could "
                f"not tell which (the loading's CPU time was not recorded: a short run or an older "
                f"recording)" + (f", so no more than the {_cores(free, what)} free." if free else ".")
            )
            if free and target > free:
                target, why = free, None
        if why is not None:
            reason += " " + why.format(n=target)
        elif needed is not None and target == want > needed:
            # the title's number is the rounded one: say so, so evidence, fix and title agree
            reason += (f" That rounds up to {target} (a power of two), so repeated runs of one script "
                       "suggest the same number.")
        span = _span(spread, workers, min(limits)[0] if limits else target) if bound == "waiting" else None
        if span is not None:
            lo, hi = span
            out["num_workers_range"] = f"{lo}-{hi}"
            reason += (
                f" The steps varied: a quarter of them needed {_workers(lo)} or fewer, a quarter "
                f"{_workers(hi)} or more, so {lo}-{hi} workers is the range to try; start with {target}."
            )
        if target <= workers:
            target, helps = workers, False
            reason += (
                f" With {_workers(workers)} already, more would not pay: make each read faster, or overlap "
                "the reads inside the Dataset (a thread pool or asynchronous I/O fetching a batch's samples "
                "at once)."
            )
        elif target > cores_or(logical, cores):
            reason += (
                " PyTorch warns when num_workers exceeds the CPUs it may use; for a loader that waits "
                "rather than computes that warning does not apply, but keep watching the memory."
            )
    out["suggested_num_workers"] = int(target)
    out["loader_figures"] = figures_text(bound, workers, out, batch_size)
    out["num_workers_helps"] = bool(helps and target > workers)
    out["num_workers_reason"] = reason
    if bound == "ipc":
        out["stall_advice"] = "index whole batches instead of single samples"
    elif bound == "handoff":
        out["stall_advice"] = "workers would not shorten it"
    elif bound == "contention":
        out["stall_advice"] = "the machine's CPUs are busy"
    elif helps and target > workers:
        out["stall_advice"] = f"try num_workers={target}"
    else:
        out["stall_advice"] = "building batches needs more CPU than this machine has"
    return out


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


def step_ratios(points: list[Any], workers: int, wait_share: float = 1.0) -> tuple[float, float, float] | None:
    """(median, lower quartile, upper quartile) of each step's load time over its compute
    time, as :func:`advise` computes it over all steps (a loader's batch takes ``wait``
    without workers, ``workers x dur`` with them). None under 8 usable steps."""
    ratios = []
    for p in points:
        wait = p.wait * wait_share
        wall = p.dur - wait
        if wall <= 0 or p.dur <= 0 or wait <= 0:
            continue
        ratios.append((workers * p.dur if workers else wait) / wall)
    if len(ratios) < 8:
        return None
    q = statistics.quantiles(ratios, n=4, method="inclusive")
    return statistics.median(ratios), q[0], q[2]


def _waiting_limits(
    load: float, load_cpu: float | None, free: int | None, mib: float, memory_cap: int | None,
    available: int | None, batches_per_start: int | None, start_ms: float, method: str, what: str,
) -> list[tuple[int, str]]:
    """Upper bounds on workers for a loader that waits, each with its reason ("{n}": the number).

    Cores do not bound waiting workers, but memory, start-up cost, the CPU they still use
    and plain process count do; the lowest bound that cuts the suggestion is explained.
    """
    limits: list[tuple[int, str]] = [(MAX_WORKERS, (
        "Beyond {n} worker processes the gain rarely pays for their memory and start-up: start "
        "with {n} and raise it only while the waiting keeps falling."
    ))]
    if memory_cap is not None and available:
        limits.append((memory_cap, (
            f"Each worker holds about {mib:.0f} MiB, and a quarter of the {available / 1024**3:.1f} GiB "
            "free at the start allows {n} without crowding the training."
        )))
    if batches_per_start and load > 0:
        # n workers save about B * L * (1 - 1/n) of loading over B batches and cost n
        # start-ups of s each: past sqrt(B * L / s) one more costs more than it saves
        limits.append((max(1, math.ceil(math.sqrt(batches_per_start * load / start_ms))), (
            f"Starting a worker costs about {start_ms:,.0f} ms ({method}), and workers are started "
            f"for every {batches_per_start} batches here: beyond {{n}} they cost more to start than "
            "they save, so start with that."
        )))
    if load_cpu and free and load > load_cpu:
        # each waiting worker is on a CPU load_cpu of every load ms
        limits.append((max(1, math.floor(free * load / load_cpu)), (
            f"Each worker still computes {load_cpu:.1f} ms of every {load:.1f} ms, so about {{n}} "
            f"fill the {_cores(free, what)} free beside the training."
        )))
    return limits


def cores_or(logical: int | None, cores: int | None) -> int:
    """The CPUs PyTorch compares num_workers with (logical ones), else the cores, else 1."""
    return logical or cores or 1


def _r(v: float | None, digits: int = 3) -> float | None:
    return None if v is None or not math.isfinite(v) else round(v, digits)


def _cores(n: int, what: str) -> str:
    """'1 physical core', '3 physical cores'."""
    return f"1 {what[:-1] if what.endswith('s') else what}" if n == 1 else f"{n} {what}"


def _workers(n: int | None) -> str:
    return "1 worker" if n == 1 else f"{n} workers"


def figures_text(bound: str, workers: int, out: dict[str, Any], batch_size: int | None) -> str:
    """One sentence of measured figures for the finding's evidence."""
    load, cpu, runq = out.get("load_ms"), out.get("load_cpu_ms"), out.get("fetch_runq_ms")
    if load is None:
        return ""
    if workers:
        parts = f"Each of the {workers} workers takes about {load:.1f} ms per batch"
        if cpu is not None:
            parts += f", {cpu:.1f} ms of it CPU work"
    else:
        parts = f"Loading one batch of {batch_size} samples takes {load:.1f} ms in the training process"
        if cpu is not None:
            parts += f", {cpu:.1f} ms of it CPU work"
        if runq:
            parts += f" and {runq:.1f} ms waiting for a free CPU core"
    busy = out.get("machine_busy_share")
    if busy is not None and busy >= 0.9:
        parts += f"; the machine's CPUs were {busy:.0%} busy"
    names = {"waiting": "mostly waiting (I/O, sleep)", "cpu": "CPU work", "ipc": "indexing memory",
             "contention": "waiting for a busy CPU", "unknown": "not measured",
             "handoff": "about as cheap in the training process as taking the batch in from a worker"}
    if bound == "unknown":
        return f"{parts}."
    if bound == "ipc" and workers:
        return f"{parts}. The workers keep up: the wait is taking their batches in."
    return f"{parts}. The loading is {names.get(bound, bound)}."
