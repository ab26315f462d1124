"""What the DataLoader does while the training waits, and how many workers that calls for.

All figures come from the same steady steps, so the wait and compute per step add up
to the step: ``wait_ms + compute_ms == step_ms`` (means, not medians: a median step and
a mean wait need not add up to anything).

A loader is classified by where the time of one batch goes:

* ``waiting``: most of the fetch is neither on a CPU nor queued for one (disk, network,
  ``time.sleep``, decompression that releases the GIL). Workers overlap the waits, so
  the number that hides it follows from the times alone, not from the cores.
* ``cpu``: building the batch is computation. Workers run it in parallel only on free
  cores: the number is bounded by the cores the training leaves free, and when those
  cannot cover it the honest advice is to make loading cheaper.
* ``ipc``: the batch comes from memory (a ``TensorDataset``, or a few microseconds per
  sample): the cost is per-sample indexing and collating in Python, and sending batches
  through worker processes would cost as much again. Index whole batches instead.
* ``contention``: the loader mostly waited for a free core (the run queue): the machine
  is busy, and more processes would only lengthen the queue. Also a loader in the
  training process that computes while other programs left no half core free beside the
  training: a worker process would only queue for the same cores (measured on a 2-core
  machine beside other busy processes: minGPT's adder and makemore "waited" 17-19% and
  were told to try a worker). A fetch from an in-memory dataset that was neither on its
  CPU nor counted in the run queue lost that time to the machine too (descheduled, the GIL
  held by a thread without a core, a VM's stolen time), never to I/O; and whatever the
  dataset, a cheap fetch whose time off the queue, less a worker's handover, is under the
  stall's lower band is the queue's: workers could not hide it.
* ``handoff``: loading in the training process costs about what taking the same batch in
  from a worker process would (:func:`handoff_ms`): workers would build it in parallel, but
  the wait they leave is no shorter. Cheaper batches are the fix, not workers.
* ``sampler``: most of the wait is drawing each batch's indices from the (batch) sampler
  (:func:`sampler_bound`). torch does that in the training process whatever
  ``num_workers`` is (torch/utils/data/dataloader.py: ``_next_data`` calls ``_next_index``
  without workers, ``_try_put_index`` with them), so workers cannot take it over: a
  ``BucketBatchSampler`` that slept 20 ms a batch ran 1.1x slower with the 6 workers its
  wait called for. The sampler must get cheaper.
* ``unknown``: the figures needed were not recorded (older recordings, short runs).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...session.session import Session
from .common import num

if TYPE_CHECKING:
    from ...session.steps import StepPoint

HEADROOM = 1.25
"""Workers to spare: 25% more than the bare ratio absorbs jitter in load and compute."""
CPU_BOUND_SHARE = 0.5
"""A fetch that spends at least half its wall time on a CPU is computation, not waiting."""
IPC_SAMPLE_US = 20.0
"""Under 20 µs of CPU per sample is indexing memory, not building a sample: about what
passing the batch through a worker process would cost in pickling and copying."""
IN_MEMORY_DATASETS = frozenset({"TensorDataset", "StackDataset"})
WORKER_MIB_DEFAULT = 300
"""Memory per worker when none ran yet: a spawned worker (macOS) imports torch and the
script again, about 200-400 MiB resident; forked workers start smaller but grow as they
touch the dataset (copy-on-read)."""
MEMORY_FOR_WORKERS = 0.25
"""At most a quarter of the memory available at the start goes to new workers: the rest
is the training's, the page cache's and the other programs'. A worker's resident memory
also grows as it touches a dataset held in Python objects (copy-on-read, see
https://github.com/pytorch/pytorch/issues/13246), so the measured figure is a floor."""
MAX_WORKERS = 8
"""At most 8 workers are suggested at once. A waiting loader needs no core per worker, but
every process costs memory and start-up; bare A/B runs of a loader that sleeps 10 ms per
sample on 2 cores (see the rule file) measured 8 workers as fast as 16 or 25. For more
parallel waiting, threads or asynchronous reads inside the Dataset scale further."""
CONTENDED_SHARE = 0.5
"""When half of the training's wait was spent queued for a core, the machine is the limit."""
STARVED_SHARE = 0.10
"""With workers, the training must be left without a ready batch for at least 10% of its
time (the rules' lower band) before the workers count as the limit: below that the wait
was handing batches over and queuing for a core, which a trivial dataset also shows on a
busy 2-core machine, and which more workers do not shorten."""
CHEAP_LOADING = 0.15
"""Loading that needs under 15% of the training's time per batch in CPU work is cheap:
if the training still waits, the time went to queuing for a busy CPU."""
RECEIVE_BATCH_MS = 1.4
RECEIVE_TENSOR_MS = 0.28
RECEIVE_CPU_BATCH_MS = 1.0
RECEIVE_CPU_TENSOR_MS = 0.2
"""What the training process spends taking one batch in from a worker process, in ms of
wall time and of its CPU time: a fixed part (the queue, unpickling) and a part per tensor.
Each tensor's storage crosses in shared memory, and with Linux's default
``file_descriptor`` strategy its descriptor comes over a socket from the worker, a
connection per storage (torch/multiprocessing/reductions.py: ``reduce_storage``,
``rebuild_storage_fd``). benchmarks/handoff.py measured on 2 x86 cores, fork, batches of
32 samples: 1.7 / 2.0 / 4.0 / 10.3 ms of wall time for 1 / 2 / 8 / 32 small tensors (1.3,
1.5, 2.7, 6.5 ms of CPU; 1.0, 1.4, 2.9, 7.6 on a busy machine), where building the same
batches in the training process took 0.6-0.8, 0.6-0.8, 1.0-1.2 and 2.8-3.1 ms of CPU.
macOS has only the ``file_system`` strategy (https://pytorch.org/docs/stable/multiprocessing.html,
"Sharing strategies"): each storage is opened by its shared-memory name instead, still one
round per tensor; no Mac was at hand to measure it, so the Linux figures stand for both."""
HANDOFF_MARGIN = 2.0
"""Workers must beat twice the handover's estimate before they count as a gain. The
benchmark times the handover alone, on an otherwise idle machine; end to end a worker also
takes a core from the training: makemore's own loader (batches of 32 words, 2 tensors,
num_workers=0, 5.9 ms per step bare, 2 x86 cores) ran at 8.6 ms per step with one worker,
2.7 ms more per step, where the handover alone predicts 2.0 ms in all. And under load the
training's own CPU time per fetch grows (1.5 to 2.2 ms for tests/scripts_loader/char_style.py
beside one busy process) while the handover's estimate stays fixed. Telling a user to add
workers that make the run slower is the harm to avoid; a loader whose batches cost several
times the handover still clears this margin."""
TENSORS_DEFAULT = 2
"""Tensors per batch when not recorded (older recordings): an input and a target."""
MIN_WINDOW_S = 0.4
"""CPU totals of the workers are sampled every 0.5 s: a shorter window gives no rate."""


@dataclass
class LoaderFigures:
    """Sums over the steady steps (seconds) and the worker totals over the same window."""

    steps: int = 0
    batches: int = 0
    dur: float = 0.0
    wait: float = 0.0
    wait_cpu: float | None = None
    wait_runq: float | None = None
    window_s: float | None = None
    window_batches: float | None = None
    workers_cpu: float | None = None
    workers_startup: float | None = None
    """Of ``workers_cpu``, the seconds workers spent before their first batch (forked
    workers only, probe/worker_startup.py): none of a batch's work."""
    workers_runq: float | None = None
    main_cpu: float | None = None
    machine_busy: float | None = None
    machine_steal: float | None = None
    """Mean share of the machine's CPU time a hypervisor stole over the window (Linux VMs)."""
    batch_tensors: int | None = None
    others_wait: float = 0.0
    """Seconds of ``dur`` the steps waited for other loaders' batches (an evaluation pass's
    inside a step): neither this loader's wait nor training, so no part of the compute a
    batch of this loader is used in."""

    @property
    def per_batch(self) -> float:
        return 1.0 / self.batches if self.batches else 0.0

    def worker_cpu_per_batch(self) -> float | None:
        """The workers' CPU seconds per batch, their start-ups left out: 8 workers started
        again at every epoch for 2 batches each put ~60 ms of start-up on each 10 ms batch,
        and the loader read as CPU work (a "floor" above the step it measured)."""
        if self.workers_cpu is None or not self.window_batches:
            return None
        return max(0.0, self.workers_cpu - (self.workers_startup or 0.0)) / self.window_batches

    def worker_runq_per_batch(self) -> float | None:
        if self.workers_runq is None or not self.window_batches:
            return None
        return self.workers_runq / self.window_batches

    def worker_wait_split(self, workers: int = 1) -> tuple[float, float, float] | None:
        """The training thread's wait per batch on ``workers`` workers: (queued, receiving, starved).

        ``queued``: ready to run but without a core, its own thread's or the worker's it
        waited for (at most as long as it was blocked). The workers' queuing is summed over
        all of them (the sampler's ``runq_workers_s``): where several work at once, their
        queuing overlaps, and the training waits on one batch at a time, so only the sum
        over the workers at work at once is in its way (:meth:`workers_at_once`). 4 workers
        on 2 cores queued 20.5 ms a batch among them against 13.7 ms of wall time a batch.
        ``receiving``: its CPU time taking
        the batch in (unpickling), plus as much again blocked: each tensor's shared memory
        is fetched from the worker in a round trip. ``starved``: the rest, when no batch
        was ready because the workers were busy loading; only that part more workers
        shorten. None without the training thread's run-queue readings (not Linux); without
        the workers' (a run too short for two samples of them) none of the blocked time is
        put down to their queuing, which can only overstate ``starved``.
        """
        if self.wait_cpu is None or self.wait_runq is None:
            return None
        per = self.per_batch
        wait = self.wait * per
        cpu, runq_main = self.wait_cpu * per, self.wait_runq * per
        blocked = max(0.0, wait - cpu - runq_main)
        runq = (self.worker_runq_per_batch() or 0.0) / self.workers_at_once(workers)
        queued = runq_main + min(blocked, runq)
        starved = max(0.0, blocked - min(blocked, runq) - cpu)
        return queued, cpu, starved

    def workers_at_once(self, workers: int) -> float:
        """How many of the ``workers`` were at work at once, as measured: their CPU and
        run-queue time per batch over the wall time per batch (of the same window), at
        least 1 and at most ``workers``. Time a worker sleeps or reads is not measured, so
        this is a floor: the workers' queuing is never spread thinner than what their
        measured time proves overlapped (1 where they kept up, mostly idle)."""
        cpu, runq = self.worker_cpu_per_batch(), self.worker_runq_per_batch()
        if workers <= 1 or cpu is None or runq is None or not self.window_s or not self.window_batches:
            return 1.0
        wall = self.window_s / self.window_batches
        return min(float(workers), max(1.0, (cpu + runq) / wall))

    def handoff_ms(self, cpu: bool = False) -> float:
        """Estimated ms (of wall time, or of CPU) the training would spend taking one of
        these batches in from a worker."""
        tensors = max(1, self.batch_tensors if self.batch_tensors is not None else TENSORS_DEFAULT)
        if cpu:
            return RECEIVE_CPU_BATCH_MS + RECEIVE_CPU_TENSOR_MS * tensors
        return RECEIVE_BATCH_MS + RECEIVE_TENSOR_MS * tensors

    def handoff_saving(self) -> float:
        """The share of the training time workers could save at most, loading in-process now
        (against the handover's estimate times :data:`HANDOFF_MARGIN`).

        Building a batch is computation: its CPU time against the CPU time taking it in from
        a worker would cost, applied to the wait (a busy machine stretches both alike, so
        the comparison does not move with the load). Otherwise the wait is mostly waiting
        (I/O, sleep): all of it but the handover's wall time could be hidden.
        """
        if self.dur <= 0 or not self.batches:
            return 0.0
        per = self.per_batch
        wait = self.wait * per
        cpu = self.wait_cpu * per if self.wait_cpu is not None else None
        runq = (self.wait_runq or 0.0) * per
        if cpu is not None and cpu >= max(0.0, wait - cpu - runq):
            handoff_cpu = HANDOFF_MARGIN * self.handoff_ms(cpu=True) / 1000.0
            saved = wait * max(0.0, 1.0 - handoff_cpu / cpu) if cpu > 0 else 0.0
        else:
            saved = max(0.0, wait - HANDOFF_MARGIN * self.handoff_ms() / 1000.0)
        return saved / (self.dur * per)

    def main_cores(self) -> float | None:
        if self.main_cpu is None or not self.window_s:
            return None
        return self.main_cpu / self.window_s

    def train_per_batch(self, cpu_device: bool) -> float:
        """Seconds of training per batch when it does not wait for data.

        The wall time between fetches, except on a CPU device where the training is CPU
        work: there its CPU time (the process's, less what the fetches used) is what it
        would take on a core of its own, and a busy machine stretches the wall time.
        """
        wall = max(0.0, self.dur - self.wait - self.others_wait) * self.per_batch
        if not cpu_device or self.main_cpu is None or not self.window_batches:
            return wall
        cpu = self.main_cpu / self.window_batches - (self.wait_cpu or 0.0) * self.per_batch
        return min(wall, cpu) if cpu > 0.1 * wall else wall

    def training_cores(self, workers: int) -> int:
        """Cores the training itself keeps busy: one (its thread), more when its process's
        CPU use says so (intra-op threads); loading in the main process is not training."""
        cores = self.main_cores()
        if cores is None:
            return 1
        loading = self.wait_cpu / self.dur if not workers and self.wait_cpu is not None and self.dur > 0 else 0.0
        return max(1, round(cores - loading))


def measure(session: Session, points: list[StepPoint], late: bool) -> LoaderFigures:
    """Figures over ``points`` (the steady steps kept one by one) plus, when ``late``, the
    aggregated later steps; worker CPU from the sampler over the same stretch of time."""
    steps = session.steps
    fig = LoaderFigures()
    fig.steps = len(points)
    fig.batches = sum(p.batches for p in points)
    fig.dur = sum(p.dur for p in points)
    fig.wait = sum(p.wait for p in points)
    cpu = [p.wait_cpu if p.wait > 0 else 0.0 for p in points]
    runq = [p.wait_runq if p.wait > 0 else 0.0 for p in points]
    fig.wait_cpu = None if any(v is None for v in cpu) else sum(v for v in cpu if v is not None)
    fig.wait_runq = None if any(v is None for v in runq) else sum(v for v in runq if v is not None)
    if late and steps.late_n:
        fig.steps += steps.late_n
        fig.batches += steps.late_batches
        fig.dur += steps.late_dur
        fig.wait += steps.late_wait
        fig.wait_cpu = _plus(fig.wait_cpu, steps.late_wait_cpu if steps.late_wait > 0 else 0.0)
        fig.wait_runq = _plus(fig.wait_runq, steps.late_wait_runq if steps.late_wait > 0 else 0.0)
    if points:
        _worker_window(session, points, fig, late and bool(steps.late_n))
    return fig


def _worker_window(session: Session, points: list[Any], fig: LoaderFigures, late: bool) -> None:
    """Worker and machine CPU between the first and last memory samples inside the steps,
    or, where those are fewer than two or too close, between the steps' own start and end
    read off the samples around each (:func:`_edges`)."""
    start = points[0].end - points[0].dur
    end = session.steps.last_end if late and session.steps.last_end is not None else points[-1].end
    samples = session.memory.series.points()
    inside = [m for m in samples if start <= m.ts <= end]
    a: Any
    b: Any
    if len(inside) >= 2 and inside[-1].ts - inside[0].ts >= MIN_WINDOW_S:
        a, b = inside[0], inside[-1]
        # each sample's share covers the time since the one before: the first one's lies outside
        shares = inside[1:]
    else:
        edges = _edges(samples, start, end)
        if edges is None:
            return
        a, b, shares = edges
    fig.window_s = b.ts - a.ts
    if late:
        fig.window_batches = fig.batches * fig.window_s / fig.dur if fig.dur > 0 else None
    else:
        fig.window_batches = float(sum(p.batches for p in points if a.ts < p.end <= b.ts))
    fig.workers_cpu = _delta(a.cpu_workers_s, b.cpu_workers_s)
    fig.workers_startup = _delta(a.cpu_workers_startup_s, b.cpu_workers_startup_s)
    fig.workers_runq = _delta(a.runq_workers_s, b.runq_workers_s)
    fig.main_cpu = _delta(a.cpu_main_s, b.cpu_main_s)
    fig.machine_busy = _mean_share(shares, "sys_busy")
    fig.machine_steal = _mean_share(shares, "sys_steal")


@dataclass(frozen=True)
class _Reading:
    """The sampler's running totals as they stood at ``ts``, between two samples."""

    ts: float
    cpu_workers_s: float | None
    cpu_workers_startup_s: float | None
    runq_workers_s: float | None
    cpu_main_s: float | None


BRACKET_SHARE = 0.5
"""Of the time between the samples that bracket the steps, at least half must be the steps'
own for their totals to be read off those samples: a sampler that stopped, or went unscheduled for
seconds, leaves no reading of the steps' own stretch to interpolate."""


def _edges(samples: list[Any], start: float, end: float) -> tuple[_Reading, _Reading, list[Any]] | None:
    """The running totals at the steps' ``start`` and ``end``, each read off the samples on
    either side of it (CPU seconds accrue evenly between two samples half a second apart),
    and the samples whose share of the machine covers part of the window; None unless the
    window is long enough for a rate, at least as long as the sampler's interval around it
    (the sampler's resolution), and the samples around it cover mostly the window
    (:data:`BRACKET_SHARE`).

    A steady stretch of 0.9 s (Lightning's 19 steady steps in tests/e2e/test_frameworks.py)
    holds one or two samples 0.5 s apart, by chance: with one, the workers' CPU read as not
    measured, though samples 70 ms before the start and 2 ms after the end were there."""
    if end - start < MIN_WINDOW_S:
        return None
    first = next((m.ts for m in reversed(samples) if m.ts <= start), None)
    last = next((m.ts for m in samples if m.ts >= end), None)
    if first is None or last is None or (end - start) < BRACKET_SHARE * (last - first):
        return None
    around = [m.ts for m in samples if first <= m.ts <= last]
    if end - start < max(b - a for a, b in zip(around, around[1:], strict=False)):
        # shorter than the sampler's own interval there: its figures would be one
        # interval's, mostly of what came before or after (as unmeasured as before)
        return None
    a, b = _reading_at(samples, start), _reading_at(samples, end)
    return a, b, [m for m in samples if start < m.ts <= last]


def _reading_at(samples: list[Any], t: float) -> _Reading:
    """The totals at ``t``, linear between the samples on either side (there are some)."""
    before = next(m for m in reversed(samples) if m.ts <= t)
    after = next(m for m in samples if m.ts >= t)
    if after.ts == before.ts:
        return _Reading(t, before.cpu_workers_s, before.cpu_workers_startup_s, before.runq_workers_s,
                        before.cpu_main_s)
    share = float((t - before.ts) / (after.ts - before.ts))

    def at(name: str) -> float | None:
        x: float | None = getattr(before, name)
        y: float | None = getattr(after, name)
        if x is None or y is None or not (math.isfinite(x) and math.isfinite(y)):
            return None
        return x + (y - x) * share

    return _Reading(t, at("cpu_workers_s"), at("cpu_workers_startup_s"), at("runq_workers_s"), at("cpu_main_s"))


def _mean_share(points: list[Any], name: str) -> float | None:
    """The mean of the samples' ``name`` (a share of the machine's CPU time), None where no
    sample has a figure."""
    values = [v for v in (getattr(m, name) for m in points) if v is not None and math.isfinite(v)]
    return sum(values) / len(values) if values else None


def classify(fig: LoaderFigures, workers: int, dataset: str | None, batch_size: int | None,
             train: float, free: int | None) -> str:
    """Where a batch's time goes; see the module docstring for the classes.

    CPU demand is judged first because it does not depend on how busy the machine is:
    a loader that needs more cores than the training leaves free is CPU-bound even when
    it also queued for them. Otherwise the largest part of the fetch decides: CPU work,
    waiting for a core (contention) or waiting for anything else (I/O, sleep).
    CPU work in the training process is ``cpu`` however busy other programs keep the
    cores: a worker process is one more runnable task, and the scheduler shares the cores
    among tasks, so workers take their CPU from the other programs (with two busy programs
    on 2 cores, one worker took tests/scripts_loader/cpu_workers.py from 18.4 s to 10.2 s).
    """
    if fig.wait <= 0 or not fig.batches:
        return "unknown"
    per_batch = max(1, batch_size or 1)
    if workers == 0:
        if fig.wait_cpu is None:
            return "unknown"
        own_cpu, runq = fig.wait_cpu * fig.per_batch, (fig.wait_runq or 0.0) * fig.per_batch
        blocked = max(0.0, fig.wait * fig.per_batch - own_cpu - runq)
        # a VM's stolen time is neither the thread's CPU time nor its wait in the guest's
        # run queue: the fetch's share of it is the machine's, not the loader's
        stolen = min(blocked, (fig.machine_steal or 0.0) * fig.wait * fig.per_batch)
        runq, blocked = runq + stolen, blocked - stolen
        in_memory = dataset in IN_MEMORY_DATASETS
        if in_memory:
            # indexing tensors in memory neither reads nor sleeps: the time its fetch was
            # neither on a CPU nor counted in the run queue is the machine's (the thread
            # descheduled, the GIL held by a thread without a core, a VM's stolen time)
            runq, blocked = runq + blocked, 0.0
        cheap = own_cpu < CHEAP_LOADING * train or own_cpu / per_batch * 1e6 < IPC_SAMPLE_US
        hidden = blocked - fig.handoff_ms() / 1000.0
        if runq > own_cpu + blocked and cheap and hidden < STARVED_SHARE * fig.dur * fig.per_batch:
            # queued for a core, though loading itself costs little, and what workers could
            # hide (the waits off the queue, less taking their batch in) is under the stall's
            # lower band: an in-memory TensorDataset beside 10 busy loops on 2 cores waited
            # 22.2 ms a batch, 19.9 ms of it queued and 0.5 ms on its CPU, and was sized 8
            # workers for "waiting"; a list of tensors, 29.5 ms (23.8 queued, 0.4 on its CPU)
            return "contention"
        if own_cpu >= blocked and (in_memory or own_cpu / per_batch * 1e6 < IPC_SAMPLE_US):
            return "ipc"
        if fig.handoff_saving() < STARVED_SHARE:
            return "handoff"  # a worker's batch would keep the training waiting about as long
        return "cpu" if own_cpu >= blocked else "waiting"
    # workers build the batches; the training thread only receives them
    if fig.wait_cpu is not None and fig.wait_cpu >= CPU_BOUND_SHARE * fig.wait:
        return "ipc"  # receiving (unpickling, copying) is the cost, not producing
    cpu = fig.worker_cpu_per_batch()
    if cpu is not None and dataset in IN_MEMORY_DATASETS and cpu / per_batch * 1e6 < IPC_SAMPLE_US:
        return "ipc"
    runq = fig.worker_runq_per_batch() or 0.0
    produce = workers * fig.dur * fig.per_batch  # each busy worker delivers a batch this often
    blocked = max(0.0, produce - (cpu or 0.0) - runq)
    if cpu is not None and free is not None and train > 0 and cpu / train > free and cpu + runq >= blocked:
        # more loading than the free cores can do, however quiet the machine: where the
        # workers mostly compute or queue for a core. Workers that mostly sleep (I/O) are
        # not held back by the cores (4 of them sleeping 29 of their 31 ms a batch beside
        # busy programs were told to keep 4 and make each batch cheaper; 8 halve the wait)
        return "cpu"
    wait = fig.wait * fig.per_batch
    split = fig.worker_wait_split(workers)
    if split is not None:
        queued, receiving, starved = split
        if starved < STARVED_SHARE * fig.dur * fig.per_batch:
            # the workers kept up: the wait was handing batches over and queuing for a
            # core, which more workers do not shorten
            return "contention" if queued >= receiving else "ipc"
        if queued >= CONTENDED_SHARE * wait:
            return "contention"
    if cpu is None:
        return "unknown"
    return "cpu" if cpu >= blocked else "waiting"


SAMPLER_SHARE = 0.5
"""A loader whose index draws take at least half of its wait per batch is ``sampler``-bound:
whatever workers hid of the rest, the wait would stay at half or more."""
MIN_INDEX_CALLS = 8
"""Index draws timed before their mean counts (a short run's few are one sampler's set-up)."""
TORCH_BATCH_SAMPLER = "BatchSampler"
"""torch's own batch sampler (``batch_size=`` builds one around ``sampler``): a slow draw
through it is its ``sampler``'s."""


def sampler_bound(loader: Mapping[str, Any]) -> tuple[float, str, str] | None:
    """(seconds per batch drawing its indices, the class that draws them, ``batch_sampler``
    or ``sampler``: the DataLoader argument it came in) when that takes ``SAMPLER_SHARE`` of
    the loader's own wait per batch (probe/loader_sites.py: ``index_s`` over ``index_calls``,
    ``fetch_s`` over ``fetches``, both in the training process); else None."""
    calls, index_s = num(loader.get("index_calls")), num(loader.get("index_s"))
    fetches, fetch_s = num(loader.get("fetches")), num(loader.get("fetch_s"))
    if calls is None or index_s is None or fetches is None or fetch_s is None:
        return None
    if calls < MIN_INDEX_CALLS or fetches < 1 or fetch_s <= 0:
        return None
    per_batch = index_s / calls
    if per_batch < SAMPLER_SHARE * fetch_s / fetches:
        return None
    batch_sampler, sampler = loader.get("batch_sampler"), loader.get("sampler")
    if isinstance(batch_sampler, str) and batch_sampler != TORCH_BATCH_SAMPLER:
        return per_batch, batch_sampler, "batch_sampler"
    if isinstance(sampler, str):
        return per_batch, sampler, "sampler"
    return per_batch, batch_sampler if isinstance(batch_sampler, str) else "?", "batch_sampler"


def _delta(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)):
        return None
    return max(0.0, b - a)


def _plus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b
