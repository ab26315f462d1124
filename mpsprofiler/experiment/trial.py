"""``mpsprof try``: run the script as written (A) and with a change (B), interleaved.

Runs alternate in pairs, the order flipping every pair (A B, B A, A B ...) so a load
that drifts over the experiment hits both sides alike. Every run is cut after the same
number of steps (``--max-steps``) and measured by its steady median step time, the
figure the step panel shows. Op accounting is off in experiment runs (less noise).
The verdict and interval come from :mod:`.stats`.

Safety: each run is the user's script doing what it always does (it may write files
where it always writes them: ``cwd`` lets the user point it at a scratch directory).
mpsprof writes only into the experiment's own directory. A total time budget bounds
the experiment; :meth:`Trial.stop` (Ctrl-C, the TUI) ends the run in progress the way
the Stop key does and keeps the pairs already finished.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

from ..launcher.child import RunController, RunSpec
from ..launcher.options import ProbeOptions
from ..results import ExperimentResult, finish_run
from ..rundir import OUTPUT_FILE, RunDirInUse, open_regular, prepare_run_dir
from ..session.session import Session
from ..settings import describe, label, merge
from . import stats

Progress = Callable[[str], None]
LOSS = re.compile(
    r"(?<![A-Za-z0-9_])(?:[A-Za-z0-9]+_)*loss(?![A-Za-z0-9])"  # loss, Loss, train_loss; not lossy, not glosses
    r"""['"]?\s*[:=]?\s*(?:tensor\()?"""  # 'loss': (a dict), loss= (tqdm's postfix), loss: tensor(
    r"""(?P<quote>['"]?)"""  # '0.53': transformers 5 logs the values as strings
    r"(?P<value>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)(?P=quote)",
    re.IGNORECASE,
)
"""A printed loss value. Formats seen in training scripts: ``loss: 0.53``, ``Loss 0.53``,
``loss=0.53`` (tqdm's postfix ``..., loss=0.53]``), ``{'loss': 0.53}`` (a dict printed, as
the HF Trainer logs up to transformers 4), ``{'loss': '0.53'}`` (transformers 5 formats the
logged values as strings before printing them), ``train_loss 0.53``, ``"loss": 0.53`` (JSON
lines), ``loss: tensor(0.53)``. A quote before the number must close after it, so a quoted
string that merely starts with digits (``'loss': '3rd'``) is no value."""
MAX_LOSSES = 2000
OK = ("cut", "finished")
LOSS_TOLERANCE = 0.05
"""Loss trajectories within 5% (relative), or within twice the spread between the
unchanged runs themselves, count as equivalent."""


@dataclass
class Target:
    """What to run: the script and its arguments exactly as the user runs it.

    The "what" half of a :class:`~mpsprofiler.launcher.child.RunSpec` (which adds how: run
    directory, probe options, environment); :meth:`run_spec` is the one place a trial's run
    is built from it."""

    target: str
    args: list[str] = field(default_factory=list)
    module: bool = False
    cwd: Path | None = None
    base: dict[str, Any] = field(default_factory=dict)
    """Settings both sides share (the recorded run's own ``--set``)."""
    env_drift: str | None = None
    """For a recorded run's script: how this shell's environment differs from the one it
    was recorded with (``launcher/env_digest.drift_words``), said with the result."""
    scratch: bool = False
    """Each run in a fresh directory under ``cwd`` (``try --cwd DIR``); otherwise each runs
    in ``cwd`` itself, the recorded run's directory, where a relative script path and the
    script's own relative paths mean what they meant there."""

    def command(self) -> str:
        return " ".join(["python", *(["-m"] if self.module else []), self.target, *self.args])

    def run_spec(self, run_dir: Path | None, options: ProbeOptions, env: dict[str, str],
                 cwd: Path | None = None) -> RunSpec:
        """This target run headless-captured, as one side of a trial (in ``cwd``, else the
        target's own directory)."""
        return RunSpec(target=self.target, args=list(self.args), module=self.module, run_dir=run_dir,
                       capture_output=True, options=options, env=env, cwd=cwd or self.cwd)


@dataclass(frozen=True)
class Window:
    """How a trial must time a change whose effect falls on a few steps only (a side
    loader's, read every ``steps / 2.5`` steps): runs long enough to span its reads, each
    judged by its mean step time (the reads included), not the median (which never sees them)."""

    steps: int
    reason: str
    """Why, in a sentence said before the runs."""


@dataclass
class TrialConfig:
    steps: int = 30
    pairs: int = 5
    budget_s: float = 300.0
    """Seconds this trial may take: the whole experiment's budget, or what is left of it."""
    min_pairs: int = 3
    total_s: float | None = None
    """The experiment's whole budget (``--budget``), for messages; None: ``budget_s``."""
    figure: str = "median"
    """Each run's figure: its median steady step (``median``), or its mean step after the
    first (``mean``: a :class:`Window`'s)."""

    def for_window(self, window: Window | None) -> TrialConfig:
        """This config for a change that needs ``window`` (None: unchanged)."""
        if window is None:
            return self
        from dataclasses import replace

        return replace(self, steps=max(self.steps, window.steps), figure="mean")

    @property
    def budget_words(self) -> str:
        total = self.total_s if self.total_s is not None else self.budget_s
        left = "" if abs(total - self.budget_s) < 1 else f", {self.budget_s:.0f} s of it left for this change"
        return f"time budget of {total:.0f} s{left}"


@dataclass
class RunOutcome:
    arm: str
    pair: int
    run_dir: str | None
    status: str
    returncode: int | None
    median_s: float | None
    steady_steps: int
    steps: int
    peak_rss: int | None
    peak_device: int | None
    wall_s: float
    crash: str | None = None
    losses: list[float] = field(default_factory=list)
    cwd: str | None = None
    """The run's own scratch directory under ``--cwd`` (None: the script's own directory)."""
    mean_s: float | None = None
    """The mean step after the first (the run's training time over its steps but one)."""


class Trial:
    def __init__(self, target: Target, change: dict[str, Any], out_dir: Path, config: TrialConfig,
                 progress: Progress | None = None, rule: str | None = None, loader: str | None = None) -> None:
        self.target = target
        self.change = change
        # ``loader``: the one loader changed, named as the finding names it (its
        # ``loader_label``: "DataLoader 1", "the Trainer's training DataLoader"), not by the
        # construction number ``--set dataloader.N`` counts, which counts a framework's
        # copies too (accelerate's: the Trainer's only loader was "DataLoader 2")
        self.label = label(change, loader)
        self.out_dir = out_dir
        self.config = config
        self.rule = rule
        self._progress = progress or (lambda text: None)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._controller: RunController | None = None
        self.outcomes: list[RunOutcome] = []
        self.stopped: str | None = None

    # -- control ------------------------------------------------------------------
    def stop(self) -> None:
        """End the run in progress (SIGINT, then SIGTERM) and start no other: thread-safe."""
        self._stop.set()
        with self._lock:
            if self._controller is not None:
                self._controller.stop(grace=3.0)

    # -- running ------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        config = self.config
        started = time.monotonic()
        deadline = started + config.budget_s  # the budget is the total: no run goes past it
        for pair in range(1, config.pairs + 1):
            if self._stop.is_set():
                self.stopped = "stopped by the user"
                break
            left = deadline - time.monotonic()
            estimate = self._pair_estimate()
            if pair > 1 and estimate > left:
                self.stopped = (f"{config.budget_words} reached: pair {pair} would not finish in "
                                f"the {max(left, 0):.0f} s left (a pair takes about {estimate:.0f} s)")
                self._progress(f"  {self.stopped}; no more pairs started")
                break
            order = ("A", "B") if pair % 2 else ("B", "A")
            done = []
            for arm in order:
                outcome = self._run_one(arm, pair, deadline)
                if outcome is None:  # stopped (the user or the budget): an unfinished run proves nothing
                    break
                done.append(outcome)
                self._progress(self._line(outcome))
                if outcome.status not in OK:
                    break
            if self.stopped:  # set by _run_one: the budget ran out while a run was in progress
                break
            self.outcomes.extend(done)
            if self._stop.is_set():
                self.stopped = "stopped by the user"
                break
            failed = [o for o in done if o.status not in OK]
            if failed:
                self.stopped = f"the {failed[0].arm} run {failed[0].status}"
                break
        return self.result(time.monotonic() - started)

    def _pair_estimate(self) -> float:
        """Seconds the next pair will take: its two runs, at the slowest run so far."""
        walls = [o.wall_s for o in self.outcomes]
        return 2.0 * max(walls) if walls else 0.0

    def _scratch_cwd(self, arm: str, pair: int) -> Path | None:
        """A fresh directory under ``--cwd`` for one run: A and B never share one, so a script
        that creates its output exclusively (or reads back what it wrote) behaves the same in
        both, and a failure of B is not the files A left behind."""
        if self.target.cwd is None or not self.target.scratch:
            return None
        import tempfile

        slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in self.label)[:40] or "change"
        return Path(tempfile.mkdtemp(prefix=f"try-{slug}-{arm.lower()}{pair}-", dir=self.target.cwd))

    def _run_one(self, arm: str, pair: int, deadline: float) -> RunOutcome | None:
        settings = self.target.base if arm == "A" else merge(self.target.base, self.change)
        try:
            run_dir, error = prepare_run_dir(self.out_dir / f"{arm.lower()}{pair}")
        except RunDirInUse as exc:
            run_dir, error = None, str(exc)
        if error:
            self._progress(f"mpsprof: {error}")
        options = ProbeOptions(no_ops=True, max_steps=self.config.steps, settings=settings or {})
        try:
            cwd = self._scratch_cwd(arm, pair)
        except OSError as exc:
            self.stopped = f"cannot create a scratch directory under {self.target.cwd}: {exc.strerror or exc}"
            return None
        spec = self.target.run_spec(run_dir, options, dict(settings.get("env") or {}), cwd)
        session = Session()
        controller = RunController(spec, session.feed_many)
        with self._lock:
            if self._stop.is_set():
                return None
            self._controller = controller
        begun = time.monotonic()
        out_of_time = False
        try:
            controller.start()
            while controller.poll() is None:
                if not out_of_time and time.monotonic() > deadline:
                    out_of_time = True  # mpsprof's own stop: never the script's failure
                    controller.stop(grace=3.0)
                time.sleep(0.05)
            controller.wait()
        finally:
            with self._lock:
                self._controller = None
        wall = time.monotonic() - begun
        if cwd is not None:
            try:
                cwd.rmdir()  # only where the script wrote nothing there: nothing to look at
                cwd = None
            except OSError:
                pass
        summary = finish_run(session, (), run_dir, controller.recorder.error, diagnose=False).results.summary
        if self._stop.is_set():
            return None
        if out_of_time:
            self.stopped = (f"stopped at the {self.config.budget_words}: the {arm} run of pair "
                            f"{pair} was ended by mpsprof (not a failure of the script or the change)")
            self._progress(f"  {self.stopped}")
            return None
        steps: Mapping[str, Any] = summary.get("steps") or {}
        mem: Mapping[str, Any] = summary.get("memory") or {}
        crash = summary.get("crash")
        exit_info = summary.get("exit")
        return RunOutcome(
            arm=arm, pair=pair, run_dir=str(run_dir) if run_dir else None, status=str(summary.get("status")),
            returncode=exit_info.get("returncode") if exit_info else None, median_s=steps.get("median_s"),
            steady_steps=int(steps.get("steady") or 0), steps=int(steps.get("count") or 0),
            peak_rss=mem.get("peak_rss_with_workers") or mem.get("peak_rss"),
            peak_device=mem.get("peak_device_allocated"), wall_s=round(wall, 3),
            crash=f"{crash.get('type')}: {crash.get('message')}"[:500] if crash else None,
            losses=read_losses(run_dir / OUTPUT_FILE) if run_dir is not None else [],
            cwd=str(cwd) if cwd is not None else None,
            mean_s=_mean_step(steps),
        )

    def _line(self, o: RunOutcome) -> str:
        side = "as written " if o.arm == "A" else f"with {self.label}"
        if o.status not in OK:
            return f"  pair {o.pair}/{self.config.pairs}  {o.arm} {side}: {o.status}" + (f" ({o.crash})" if o.crash else "")
        value = self._figure(o)
        what = "ms/step" if self.config.figure == "median" else "ms/step on average"
        median = f"{value * 1000:.1f} {what}" if value else "no steady steps"
        return f"  pair {o.pair}/{self.config.pairs}  {o.arm} {side}: {median} ({o.steps} steps, {o.wall_s:.1f} s)"

    def _figure(self, o: RunOutcome) -> float | None:
        return o.mean_s if self.config.figure == "mean" else o.median_s

    # -- result ---------------------------------------------------------------------
    def result(self, seconds: float) -> dict[str, Any]:
        """The experiment's document (:class:`~mpsprofiler.results.ExperimentResult`, built as
        one so its keys are checked; a plain dict out, which ``patch --prove`` extends)."""
        a = {o.pair: o for o in self.outcomes if o.arm == "A" and o.status in OK}
        b = {o.pair: o for o in self.outcomes if o.arm == "B" and o.status in OK}
        pairs = [(a_s, b_s) for p in sorted(a) if p in b and (a_s := self._figure(a[p])) and (b_s := self._figure(b[p]))]
        failed = [o for o in self.outcomes if o.status not in OK]
        sp = stats.speedup(pairs) if len(pairs) >= 2 else None
        out: ExperimentResult = {
            "rule": self.rule,
            "change": describe(self.change),
            "label": self.label,
            "command": self.target.command(),
            "cwd": str(self.target.cwd) if self.target.cwd else None,
            "steps": self.config.steps,
            "pairs_planned": self.config.pairs,
            "pairs": len(pairs),
            "seconds": round(seconds, 1),
            "stopped": self.stopped,
            "finished": time.time(),
            "a_median_s": [x for x, _ in pairs],
            "b_median_s": [y for _, y in pairs],
            "speedup": None if sp is None else round(sp.estimate, 4),
            "interval": None if sp is None else [round(sp.low, 4), round(sp.high, 4)],
            "memory": _memory(list(a.values()), list(b.values())),
            "loss": compare_losses([o.losses for o in a.values()], [o.losses for o in b.values()]),
            "runs": [asdict(o) | {"losses": o.losses[:50]} for o in self.outcomes],
        }
        if self.target.env_drift:
            out["env_drift"] = self.target.env_drift
        if self.config.figure != "median":
            out["figure"] = self.config.figure  # a_median_s/b_median_s then hold the runs' means
        if failed and any(o.arm == "B" for o in failed) and not any(o.arm == "A" for o in failed):
            out["verdict"] = "failed"
            out["failure"] = next(o.crash or o.status for o in failed if o.arm == "B")
        elif failed:
            out["verdict"] = "failed"
            out["failure"] = "the script as written failed: " + (failed[0].crash or failed[0].status)
        elif sp is None or len(pairs) < min(self.config.min_pairs, self.config.pairs):
            out["verdict"] = "incomplete"
        else:
            out["verdict"] = sp.verdict
            if sp.verdict == "unproven":
                out["pairs_to_settle"] = sp.pairs_to_settle()
        out["headline"] = headline(out)
        return cast(dict[str, Any], out)


def _memory(a: list[RunOutcome], b: list[RunOutcome]) -> dict[str, Any]:
    return {
        "a_peak_rss": _med([o.peak_rss for o in a]),
        "b_peak_rss": _med([o.peak_rss for o in b]),
        "a_peak_device": _med([o.peak_device for o in a]),
        "b_peak_device": _med([o.peak_device for o in b]),
    }


def _med(values: list[int | None]) -> int | None:
    m = stats.median([v for v in values if v is not None])
    return None if m is None else int(m)


def read_losses(path: Path) -> list[float]:
    """Loss values the script printed (``loss 0.53``, ``loss=0.53``, ``Loss: 0.53``)."""
    try:  # the run's own output.log: never through a symlink, never a FIFO
        with open_regular(path, follow=False) as fh:
            text = fh.read(4 << 20).decode("utf-8", "replace")
    except OSError:
        return []
    return parse_losses(text)


def parse_losses(text: str) -> list[float]:
    """The loss values in a script's output, in order (see :data:`LOSS`)."""
    out = []
    for match in LOSS.finditer(text):
        try:
            out.append(float(match.group("value")))
        except ValueError:
            continue
        if len(out) >= MAX_LOSSES:
            break
    return out


def compare_losses(a_runs: list[list[float]], b_runs: list[list[float]]) -> dict[str, Any] | None:
    """Is B's printed loss trajectory the same as A's, within the runs' own spread?"""
    a_runs = [r for r in a_runs if r]
    b_runs = [r for r in b_runs if r]
    if not a_runs or not b_runs:
        return None
    n = min(len(r) for r in a_runs + b_runs)
    if n == 0:
        return None
    ref = [stats.median([r[i] for r in a_runs]) or 0.0 for i in range(n)]

    def gap(run: list[float]) -> float:
        return max(abs(run[i] - ref[i]) / max(abs(ref[i]), 1e-8) for i in range(n))

    noise = max((gap(r) for r in a_runs), default=0.0)
    diff = max(gap(r) for r in b_runs)
    tolerance = max(LOSS_TOLERANCE, 2.0 * noise)
    return {"values": n, "max_relative_difference": round(diff, 6), "a_spread": round(noise, 6),
            "equivalent": diff <= tolerance, "a_last": ref[-1],
            "b_last": stats.median([r[n - 1] for r in b_runs])}


UNBOUNDED_RATIO = 100.0
"""An unproven speedup's interval wider than this factor (top over bottom) is not printed:
it bounds nothing, and its figures read as a measurement."""


def fmt_x(value: float) -> str:
    if value >= 10:
        return f"{value:.0f}"
    if value >= 1.5:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _memory_cost(result: ExperimentResult) -> str:
    """The change's memory next to its speed (workers cost memory): "; peak RSS 306 MiB -> 2.5 GiB"."""
    mem = result.get("memory") or {}
    a, b = mem.get("a_peak_rss"), mem.get("b_peak_rss")
    if not a or not b or abs(b / a - 1.0) < 0.1:
        return ""
    from ..units import fmt_bytes

    return f"; peak RSS {fmt_bytes(a)} -> {fmt_bytes(b)} (x{fmt_x(b / a)})"


def headline(result: ExperimentResult) -> str:
    """One line for reports: ``proven: 2.9x faster with num_workers=4, interval 2.6-3.1x, 5 pairs``."""
    label, verdict, n = result.get("label"), result.get("verdict"), result.get("pairs")
    if verdict == "failed":
        return f"not proven: the run with {label} failed ({result.get('failure')})"
    sp, interval = result.get("speedup"), result.get("interval")
    if verdict == "incomplete" or sp is None or not interval:
        return f"not proven: {n} pair{'s are' if n != 1 else ' is'} too few to judge {label}" + (
            f" ({result['stopped']})" if result.get("stopped") else "")
    span = f"interval {fmt_x(interval[0])}-{fmt_x(interval[1])}x, {n} pairs" + _memory_cost(result)
    if verdict == "faster":
        return f"proven: {fmt_x(sp)}x faster with {label}, {span}"
    if verdict == "slower":
        return f"proven slower: {fmt_x(1 / sp)}x slower with {label} (speedup {fmt_x(sp)}x, {span})"
    if verdict == "unproven":
        more = result.get("pairs_to_settle")
        hint = (f": about {more - n} more pair{'' if more - n == 1 else 's'} would likely settle it (mpsprof try --pairs {more})"
                if isinstance(more, int) and isinstance(n, int) and more > n else ": more pairs are needed")
        if interval[0] <= 0 or interval[1] / interval[0] > UNBOUNDED_RATIO:
            # two pairs of a noisy run give a Student interval of "0.00-14440679x": no figure to print
            return f"NOT PROVEN YET with {label}: {fmt_x(sp)}x over {n} pairs, too few to bound it{hint}"
        return f"NOT PROVEN YET with {label}: {fmt_x(sp)}x, {span}; the interval is too wide{hint}"
    return f"no measurable difference with {label}: {fmt_x(sp)}x, {span}"


def _mean_step(steps: Mapping[str, Any]) -> float | None:
    """``training_s`` runs from the end of step 0 to the end of the last: over ``count - 1`` steps."""
    wall, count = steps.get("training_s"), steps.get("count")
    if not isinstance(wall, (int, float)) or not isinstance(count, int) or count < 2 or wall <= 0:
        return None
    return float(wall) / (count - 1)
