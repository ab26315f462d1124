"""Step statistics: counts, warm-up, steady-state quantiles and data wait, bounded.

The first ``EARLY`` steps are kept one by one (warm-up is decided among them); later
steps go into a log-bucket histogram and running sums. Detailed and aggregated step
batches from the probe fold into the same figures, so a recording gives the same
summary as the live run.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median
from typing import Any

from .. import events
from ..events.payloads import StepAggregate, StepsFields
from .series import Series

SIGNALS = {
    "optimizer": "optimizer steps",
    "backward": "backward passes",
    "dataloader": "DataLoader batches",
    "manual": "mpsprofiler.step() calls",
    "none": "no step signal",
}
"""What counted the steps (the probe's step mode), in words for every view."""


FRAMEWORK_WORDS = {"lightning": " of a Lightning Trainer", "lightning fabric": " through Lightning Fabric",
                   "transformers Trainer": " of a Hugging Face Trainer",
                   "accelerate": " through accelerate"}
"""The ``framework`` fact's values (probe/frameworks.py) as the step counts name them."""


def signal_words(mode: str | None, framework: object = None, ahead: object = None, optimizers: object = None) -> str:
    """What counted the steps, with the framework recognised (probe/frameworks.py), the
    optimizers that make one step where several do (a framework counting each optimizer's
    step, as Lightning's ``global_step`` does, shows that many times the steps), and the
    batches fetched before the first training step that were not counted (a loader's
    look-ahead, a Trainer's accumulation window, Lightning's sanity check)."""
    words = SIGNALS.get(str(mode or "none"), str(mode))
    if isinstance(framework, str) and framework:
        words += FRAMEWORK_WORDS.get(framework, f" ({framework})")
    if isinstance(optimizers, int) and not isinstance(optimizers, bool) and optimizers > 1:
        words += f", {optimizers} optimizers stepping in each"
        if framework == "lightning":  # its global_step counts each optimizer's step (manual optimization)
            words += f": Lightning's global_step counts {optimizers} per step"
    if isinstance(ahead, int) and not isinstance(ahead, bool) and ahead > 0:
        # "as steps": their wait stays in step 0 and, with gradient accumulation, they are the
        # first update's own batches; "3 batches ... not counted" read as if they were dropped
        words += f", {ahead} batch{'es' if ahead > 1 else ''} fetched before the first step not counted as steps"
    return words


EARLY = 512
WARMUP_FACTOR = 1.5
"""A step slower than 1.5x the settled median still belongs to warm-up (kernel compile, caches)."""


@dataclass
class StepPoint:
    i: int
    end: float
    dur: float
    wait: float
    batches: int
    idle: int | None
    alloc: int | None
    wait_cpu: float | None = None
    """CPU seconds the training thread spent inside the step's fetches (None: not recorded)."""
    wait_runq: float | None = None
    """Seconds of those fetches spent waiting for a free core (Linux only)."""
    pre: float | None = None
    bwd: float | None = None


def _slower(a: StepPoint, b: StepPoint) -> StepPoint:
    """Of two steps the chart cannot both show, the slower (the later on a tie)."""
    return a if a.dur > b.dur else b


def _agg_point(step: Any) -> StepPoint | None:
    """A step an aggregate carries for the charts (its ``sample`` or ``peak``)."""
    if not isinstance(step, list) or len(step) != 7:
        return None
    return StepPoint(_int(step[0]), _num(step[1]), _num(step[2]), _num(step[3]),
                     _int(step[4]), _opt_int(step[5]), _opt_int(step[6]))


def detect_warmup(durations: list[float]) -> int:
    """Number of leading steps that are warm-up (at least one once there are 2+ steps).

    The reference is the median of the later half; warm-up ends at the first step from
    which two consecutive steps are within ``WARMUP_FACTOR`` of it. Capped at a third of
    the steps so a run that never settles still has steady figures.

    A loop whose steps alternate (a loader that yields each batch twice: 36 ms of waiting,
    then none) never has two steps in a row near the median of either kind; there the
    pairs' mean against the later half's mean decides (a third of a 40-step run was called
    warm-up, which left too few steady steps for the stall finding the run needed).
    """
    n = len(durations)
    if n < 2:
        return 0
    if n < 4:
        return 1
    later = durations[n // 2 :]
    ref = median(later)
    limit = WARMUP_FACTOR * ref
    cap = max(1, n // 3)
    for i in range(n - 1):
        if durations[i] <= limit and durations[i + 1] <= limit:
            return min(max(i, 1), cap)
    pair_limit = WARMUP_FACTOR * sum(later) / len(later)
    for i in range(n - 1):
        if durations[i] + durations[i + 1] <= 2 * pair_limit:
            return min(max(i, 1), cap)
    return cap


class StepStats:
    def __init__(self, series_capacity: int = 2048) -> None:
        self.count = 0
        self.last_index = -1
        self.mode = "none"
        self.early: list[StepPoint] = []
        self.series: Series[StepPoint] = Series(series_capacity)
        self.chart: Series[StepPoint] = Series(series_capacity, keep=_slower)
        """What the step charts draw: the slowest step of each thinned group, and the
        slowest of each aggregated batch too, so a pause among fast steps stays in sight.
        The analyzers read ``series`` (evenly spread steps)."""
        self.late_hist: dict[int, int] = {}
        self.late_n = 0
        self.late_dur = 0.0
        self.late_wait = 0.0
        self.late_batches = 0
        self.late_wait_cpu: float | None = None
        self.late_wait_runq: float | None = None
        self.total_dur = 0.0
        self.total_wait = 0.0
        self.total_batches = 0
        self.idle_waits = 0  # steps whose data wait found the device idle
        self.busy_waits = 0  # ... found the device still busy
        self.first_end: float | None = None
        self.last_end: float | None = None
        self._warmup_cache: int | None = None
        self._steady_hist_cache: tuple[tuple[int, int], dict[int, int]] | None = None
        self.late_phase: dict[str, float] = {}
        self.optimizers = 1
        """Optimizers that step in one step (a GAN's generator and discriminator: 2)."""

    # -- folding ------------------------------------------------------------------
    def feed(self, data: StepsFields) -> None:
        if data.get("restart") is True:
            self._start_training()
        self.mode = data.get("mode") or self.mode
        optimizers = data.get("optimizers")
        if isinstance(optimizers, int) and not isinstance(optimizers, bool) and optimizers > 1:
            self.optimizers = optimizers
        # in events.STEP_COLUMNS order; a recording's column may be anything: read by _int / _num
        cols: list[list[Any]] = [data.get("i") or [], data.get("end") or [], data.get("dur") or [],
                                 data.get("wait") or [], data.get("batches") or [], data.get("idle") or [],
                                 data.get("alloc") or []]  # fmt: skip
        n = min(len(c) for c in cols)
        extra = [_column(data.get("wait_cpu"), n), _column(data.get("wait_runq"), n)]
        pre, bwd = _column(data.get("pre"), n), _column(data.get("bwd"), n)
        for k in range(n):
            point = StepPoint(
                i=_int(cols[0][k]), end=_num(cols[1][k]), dur=_num(cols[2][k]), wait=_num(cols[3][k]),
                batches=_int(cols[4][k]), idle=_opt_int(cols[5][k]), alloc=_opt_int(cols[6][k]),
                wait_cpu=_opt_num(extra[0][k]), wait_runq=_opt_num(extra[1][k]),
                pre=_opt_num(pre[k]), bwd=_opt_num(bwd[k]),
            )
            self._add(point)
        agg = data.get("agg")
        if isinstance(agg, dict):
            self._add_aggregate(agg)

    def _start_training(self) -> None:
        """Training began after DataLoader-counted steps were sent (a validation pass of the
        untrained model, longer than the probe holds such steps: probe/steps.py
        ``_training_begins``): those were no training steps. Every figure starts again with
        this event's steps, numbered from 0 again; the probe counts those batches as
        fetched ahead."""
        self.__init__(self.series.capacity)  # type: ignore[misc]

    def _add(self, p: StepPoint) -> None:
        self.count += 1
        self.last_index = max(self.last_index, p.i)
        self.total_dur += p.dur
        self.total_wait += p.wait
        self.total_batches += p.batches
        if p.wait > 0 and p.idle is not None:
            if p.idle:
                self.idle_waits += 1
            else:
                self.busy_waits += 1
        if self.first_end is None:
            self.first_end = p.end - p.dur
        self.last_end = p.end
        self.series.append(p)
        self.chart.append(p)
        if len(self.early) < EARLY:
            self.early.append(p)
            self._warmup_cache = None
        else:
            self._late(p.dur, p.wait, 1, {events.bucket_of(p.dur): 1}, p.batches, p.wait_cpu, p.wait_runq)
            if p.pre is not None and p.bwd is not None:
                self._late_phases(1, p.pre, p.bwd, p.wait, p.dur)

    def _late(self, dur: float, wait: float, n: int, hist: dict[int, int], batches: int = 0,
              wait_cpu: float | None = None, wait_runq: float | None = None) -> None:  # fmt: skip
        self.late_n += n
        self.late_dur += dur
        self.late_wait += wait
        self.late_batches += batches
        if wait_cpu is not None:
            self.late_wait_cpu = (self.late_wait_cpu or 0.0) + wait_cpu
        if wait_runq is not None:
            self.late_wait_runq = (self.late_wait_runq or 0.0) + wait_runq
        for b, c in hist.items():
            self.late_hist[b] = self.late_hist.get(b, 0) + c

    def _add_aggregate(self, agg: StepAggregate) -> None:
        n = _int(agg.get("n"))
        if n <= 0:
            return
        hist = {}
        for k, v in (agg.get("hist") or {}).items():
            try:
                hist[int(k)] = int(v)
            except (TypeError, ValueError):
                continue
        dur = _num(agg.get("dur_sum"))
        wait = _num(agg.get("wait_sum"))
        self.count += n
        self.total_dur += dur
        self.total_wait += wait
        batches = _int(agg.get("batches"))
        self.total_batches += batches
        self.last_index = max(self.last_index, _int(agg.get("i_last")))
        self.idle_waits += max(0, _int(agg.get("idle_n")))
        self.busy_waits += max(0, _int(agg.get("busy_n")))
        self._late(dur, wait, n, hist, batches, _opt_num(agg.get("wait_cpu_sum")), _opt_num(agg.get("wait_runq_sum")))
        phase_n = _int(agg.get("phase_n"))
        if phase_n > 0 and "phase_dur_sum" in agg:
            # the steps whose backward passes were timed, with their own wait and duration
            # (once the loop is steady, one step in a few: probe/backward_sampling.py)
            self._late_phases(phase_n, _num(agg.get("pre_sum")), _num(agg.get("bwd_sum")),
                              _num(agg.get("phase_wait_sum")), _num(agg.get("phase_dur_sum")))
        elif phase_n > 0 and phase_n == n:  # (an older recording: all steps or none)
            self._late_phases(n, _num(agg.get("pre_sum")), _num(agg.get("bwd_sum")), wait, dur)
        sample, peak = _agg_point(agg.get("sample")), _agg_point(agg.get("peak"))
        if sample is not None:
            self.last_end = sample.end
            self.series.append(sample)
        for p in sorted((p for p in (sample, peak) if p is not None), key=lambda p: p.i):
            self.chart.append(p)
        end_last = _opt_num(agg.get("end_last"))
        if end_last is not None:
            self.last_end = max(end_last, self.last_end or end_last)

    def _late_phases(self, n: int, pre: float, bwd: float, wait: float, dur: float) -> None:
        sums = self.late_phase
        for key, v in (("n", n), ("pre", pre), ("bwd", bwd), ("wait", wait), ("dur", dur)):
            sums[key] = sums.get(key, 0) + v

    def phase_means(self) -> dict[str, float] | None:
        """Seconds per steady step with a backward pass: ``data`` (wait), ``own`` (before
        the first backward pass, less the wait: forward and the script's code between
        steps), ``backward`` (including waiting for other ranks in DDP) and ``after``
        (the optimizer step and code after backward); None without them.

        Medians of the steps held one by one (a sampled step's overhead or a pause stays
        out of them), else means of the aggregated ones."""
        held = [p for p in self.steady if p.pre is not None and p.bwd is not None]
        if held:
            pick = [(p.wait, max(0.0, p.pre - p.wait), p.bwd, max(0.0, p.dur - p.pre - p.bwd)) for p in held]  # type: ignore[operator]
            data, own, backward, after = (median(col) for col in zip(*pick, strict=True))
            return {"data": data, "own": own, "backward": backward, "after": after, "steps": len(held)}
        sums = self.late_phase
        n = sums.get("n", 0)
        if not n:
            return None
        return {"data": sums["wait"] / n, "own": max(0.0, (sums["pre"] - sums["wait"]) / n),
                "backward": sums["bwd"] / n, "after": max(0.0, (sums["dur"] - sums["pre"] - sums["bwd"]) / n),
                "steps": n}

    # -- figures ------------------------------------------------------------------
    @property
    def warmup(self) -> int:
        """Decided among the early steps only, so cached until another early step arrives."""
        if self._warmup_cache is None:
            self._warmup_cache = detect_warmup([p.dur for p in self.early])
        return self._warmup_cache

    @property
    def steady(self) -> list[StepPoint]:
        """Steady-state steps still held one by one (the early window after warm-up)."""
        return self.early[self.warmup :]

    @property
    def steady_count(self) -> int:
        return len(self.steady) + self.late_n

    @property
    def steady_batches(self) -> int:
        """Batches the steady steps fetched: with gradient accumulation several a step."""
        return sum(p.batches for p in self.steady) + self.late_batches

    def steady_sums(self) -> tuple[float, float]:
        steady = self.steady
        return (sum(p.dur for p in steady) + self.late_dur, sum(p.wait for p in steady) + self.late_wait)

    def quantile(self, q: float) -> float | None:
        """Steady-state step-time quantile: exact while all steps are held, else ~4%."""
        steady = self.steady
        if not self.late_n:
            if not steady:
                return None
            values = sorted(p.dur for p in steady)
            pos = q * (len(values) - 1)
            lo = int(pos)
            hi = min(lo + 1, len(values) - 1)
            return values[lo] + (values[hi] - values[lo]) * (pos - lo)
        hist = dict(self.late_hist)
        for b, c in self._steady_hist().items():
            hist[b] = hist.get(b, 0) + c
        total = sum(hist.values())
        target = q * total
        seen = 0
        for b in sorted(hist):
            seen += hist[b]
            if seen >= target:
                return events.bucket_value(b)
        return None

    def _steady_hist(self) -> dict[int, int]:
        """Buckets of the steady steps held one by one: they stop changing once the early
        window is full, so a live view asking for quantiles every second pays once."""
        key = (len(self.early), self.warmup)
        cached = self._steady_hist_cache
        if cached is None or cached[0] != key:
            hist: dict[int, int] = {}
            for p in self.steady:
                b = events.bucket_of(p.dur)
                hist[b] = hist.get(b, 0) + 1
            cached = self._steady_hist_cache = (key, hist)
        return cached[1]

    def data_wait_share(self) -> float | None:
        dur, wait = self.steady_sums()
        if dur <= 0:
            return None
        return min(1.0, wait / dur)

    def warmup_cost(self) -> float:
        """Seconds the warm-up steps took beyond what steady steps would have taken."""
        w = self.warmup
        if not w:
            return 0.0
        med = self.quantile(0.5) or 0.0
        return max(0.0, sum(p.dur for p in self.early[:w]) - med * w)


def _num(v: Any) -> float:
    try:
        out = float(v)
    except (TypeError, ValueError):
        return 0.0
    return out if out == out else 0.0


def _int(v: Any) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return 0


def _opt_int(v: Any) -> int | None:
    if v is None:
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _opt_num(v: Any) -> float | None:
    if v is None or isinstance(v, bool):
        return None
    try:
        out = float(v)
    except (TypeError, ValueError):
        return None
    return out if out == out and out >= 0.0 else None


def _column(values: Any, n: int) -> list[Any]:
    """An optional column: absent or the wrong length reads as unknown for every step."""
    if isinstance(values, list) and len(values) >= n:
        return values
    return [None] * n
