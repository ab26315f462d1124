"""Op accounting on sampled steps: which ops run, where, from which module and line.

PyTorch warns about the first CPU-fallback op of a process only, so fallbacks are
counted here instead, with a ``TorchDispatchMode`` that observes every op of a sampled
step (``return func(*args, **kwargs)``, never anything else). The mode, the module hooks
and the Tensor patches cost per op, so they run on a few steps only: always on an early
steady step (two where the first was cheap or left a tensor alive), then as
:mod:`.ops_schedule` decides: within ``budget`` of the wall time of all steps, and nearly
never once the census of ops per step has stopped changing. A sample that runs past two
plain steps' time (a step of many tiny ops) is cut (``SAMPLE_CAP_STEPS``), and the next one
begins at its step's backward pass, for the ops the cut left unseen (``_arm``).

The mode itself is :mod:`.ops_mode`. It is pushed with the raw dispatch-stack API and inserted *below* modes the user
entered earlier, so a user's ``with MyMode():`` still pops its own mode when it exits
(``TorchDispatchMode.__exit__`` pops whatever is on top). It reports
``ignore_compile_internals()`` so ``torch.compile`` behaves as if it were absent.

Module names come from global module hooks (``modules``), which ``torch.compile`` must
never see (``compiling``): once the script calls ``torch.compile`` the hooks are removed
and never installed again; ops are still counted, without module names (a compiled graph
is one opaque call anyway), and the run says so once.
"""

from __future__ import annotations

import functools
import math
import os
import sys
import time
import weakref
from collections.abc import Callable, Collection, Iterable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .. import events
from ..events.payloads import OpsFields
from ..kernels.readiness import COMPOSITE_KEYS, registered_from_mps_fallback
from .compiling import dynamo_used
from .failure_site import failure_fields
from .modules import ModuleTracker
from .ops_leaks import LeakTracker
from .ops_mode import OpMode, pass_higher_order_operators, shield_from_dynamo
from .ops_record import StepRecord
from .ops_schedule import DEFAULT_BUDGET, SampleSchedule
from .ops_sites import FrameFinder, TensorPatches
from .ops_stack import push_below, remove_mode
from .safe_point import SafePoint

EARLY_STEPS = (3, 5)
"""Sampled early (steps 0-1 are warm-up: allocator growth, kernel compilation): the first
always, the second where the first was cheap or left a tensor alive
(``ops_schedule.EARLY_FREE_S``)."""
LONG_FIRST_STEP_S = 5.0
"""A step 0 this long, or an optimizer that steps with a closure (LBFGS evaluates it up to
20 times per step), means a run of few, long steps: step 1 is sampled too, so a run of 2
steps still gets op accounting and dtype facts. One more sampled step of a long-step run
is paid back by the budget like the early ones."""
MAX_OPS_PER_SAMPLE = 500_000
SAMPLE_CAP_STEPS = 2
"""A sample is cut short (recording stops, the mode goes at the next module call or backward
pass) once it has run for this many plain steps' time: the mode more than doubled the step.
That is a step of many tiny ops (a recurrent cell unrolled over thousands of time steps:
~2 µs an op bare, ~14 µs more under the mode): one whole sample of such a step cost 6 steps'
time, a quarter of a 12-step run; cut, it costs at most 2 (what it recorded is kept and
marked ``truncated``). Also a sample with no boundary to end it (an evaluation after the
loop). Every other sample ends before this (its ops cost it well under one step)."""
MIN_SAMPLE_CAP_S = 0.5
"""... but never before this: short steps' samples (a few to tens of ms) are never cut."""
UNKNOWN_STEP_CAP_S = 5.0
"""The cap while no plain step's time is known yet (a sample of step 1, see ``LONG_FIRST_STEP_S``)."""
Emit = Callable[..., None]


def default_has_mps_kernel(op: str) -> bool:
    """The authoritative check on a Mac; composite ops run on MPS through their pieces."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    return bool(has(op, "MPS")) or any(has(op, key) for key in COMPOSITE_KEYS)


def default_dispatch_dump(op: str) -> str:
    """Where each of ``op``'s kernels was registered (see ``registered_from_mps_fallback``)."""
    return str(torch._C._dispatch_dump(op))


class OpAccountant:
    """Samples steps with a dispatch mode and emits one ``ops`` event per sampled step."""

    def __init__(
        self,
        emit: Emit,
        budget: float = DEFAULT_BUDGET,
        clock: Callable[[], float] = time.perf_counter,
        *,
        cpu_clock: Callable[[], float] = time.thread_time,
        device_kind: str | None = None,
        has_mps_kernel: Callable[[str], bool] | None = None,
        dispatch_dump: Callable[[str], str] | None = None,
        mps_device_type: str = "mps",
        early_steps: Iterable[int] = EARLY_STEPS,
        min_interval: int = 4,
        every_step: bool = False,
        warn_always: bool = False,
        safe_point: SafePoint | None = None,
    ) -> None:
        """``device_kind`` (mps | cuda | cpu) defaults to the device of the model's
        parameters; ``has_mps_kernel``, ``dispatch_dump`` and ``mps_device_type`` are
        injectable so the MPS path can be tested on any machine; ``every_step`` samples every step after the
        early ones (benchmarks); ``cpu_clock`` is the training thread's CPU time (what a
        sampled step cost it on a CPU run, see ``ops_schedule.EARLY_FREE_S``);
        ``warn_always`` turns ``torch.set_warn_always`` on while sampling on MPS (off by
        default: it changes what the user's stderr shows); ``safe_point`` is where a sample cut
        short leaves the mode's removal for the backward hook (see :mod:`.safe_point`)."""
        self._emit = emit
        self.schedule = SampleSchedule(budget, early_steps, min_interval, every_step)
        self.budget = self.schedule.budget
        self._clock = clock
        self._cpu_clock = cpu_clock
        self._device_kind = device_kind
        self._has_mps_kernel = has_mps_kernel
        self._dispatch_dump = dispatch_dump or default_dispatch_dump
        self._mps_type = mps_device_type
        self._warn_always = warn_always
        self._mode = OpMode(self)
        self._hops_passed: set[str] = set()  # higher-order operators the mode is registered with
        self._tracker = ModuleTracker(self._fail)
        self._patches = TensorPatches(self._on_patched_call)
        self._finder: FrameFinder | None = None
        self._kernel_cache: dict[str, bool] = {}
        self._detected: str | None = None
        self._info: dict[int, tuple[Any, Any]] = {}  # id(func) -> (OpInfo, func), kept across steps
        self._carried: dict[int, Any] = {}  # id -> weakref of model-derived tensors (ops_record)
        self._leaks = LeakTracker(lambda: self._finder)
        # sampling state (what to sample: self.schedule)
        self._active_step: int | None = None
        self._recording = False
        self._failed = False
        self._closed = False
        self._pushed = False
        self._warn_saved: bool | None = None
        self._t_begin = 0.0
        self._cpu_begin = 0.0
        self._step: StepRecord | None = None
        self._bookkeeping = 0.0
        self._pid = os.getpid()
        self._modules_off: str | None = None
        self._safe = safe_point if safe_point is not None else SafePoint()
        self._truncated = False
        self._recorded_s = 0.0
        """Seconds a truncated sample recorded before it was cut."""
        self._backward_began = False
        """A backward pass of the sampled step has started (see ``_mark_backward``)."""
        self._from_backward = False
        """The last sample was cut before its backward pass: the next begins at one."""
        self._armed = False
        """A sample of ``_active_step`` waits for the step's backward pass to begin."""
        self._began_at_backward = False
        """The sample in progress began at its step's backward pass (``from_backward``)."""
        self._anomaly: dict[str, Any] | None = None
        """Anomaly detection's state at the sampled step's backward pass (``probe/anomaly.py``)."""
        self._time_cap = MIN_SAMPLE_CAP_S
        ref = weakref.ref(self)
        try:
            os.register_at_fork(after_in_child=lambda: _forked(ref))
        except AttributeError:
            pass

    # -- the step tracker's calls -------------------------------------------------
    def on_step_boundary(self, next_step: int, last_step_duration: float | None,
                         skipped: Collection[float] = ()) -> tuple[float, float]:
        """A step boundary (the step tracker's due listener, see the probe's ``_install_ops``):
        ``skipped`` are the durations of the plain steps since the last call, which the
        tracker held because nothing was due at them (:meth:`due`). A few attribute reads and
        one call of the schedule's (``plain_step``) unless a sample starts or ends. Returns
        the next step that needs this call and the duration above which a step does too
        (the outlier test). Never raises: a failure switches op accounting off (one
        ``probe_error``)."""
        try:
            if skipped:
                self.schedule.plain_steps(skipped)
            self._on_boundary(next_step, last_step_duration)
            return self.due(next_step), self.schedule.wake_above
        except Exception as exc:
            self._fail(exc)
            self._stop()
        return math.inf, math.inf

    def _on_boundary(self, next_step: int, last_step_duration: float | None) -> None:
        sched = self.schedule
        if self._active_step is None and next_step < sched.next_sample and next_step < self._leaks.next_check:
            if last_step_duration is not None:
                sched.total += last_step_duration
                if last_step_duration > sched.wake_above:
                    sched.outlier(next_step, last_step_duration)
                sched.plain_step(next_step, last_step_duration)
            return
        if last_step_duration is not None:
            sched.total += last_step_duration
        if self._active_step is not None and self._active_step == next_step:
            return  # begun early at the first optimizer step (see on_first_optimizer_step)
        self._boundary(next_step, last_step_duration)

    def due(self, next_step: int) -> float:
        """After the boundary that begins ``next_step``: the next step index whose boundary
        needs :meth:`on_step_boundary` (a sample begins or ends, a leak check, a forced early
        step, the schedule's own plain-step work); the steps before it are plain ones whose
        durations the tracker hands over at that call. Every step while a sample is active
        or armed; never once op accounting failed or closed (its teardown is at a module call
        or backward pass then, ``_release_later``, or was done at this boundary)."""
        if self._failed or self._closed:
            return math.inf
        if self._active_step is not None or self._armed:
            return next_step + 1
        sched = self.schedule
        due = min(sched.next_sample, self._leaks.next_check, sched.plain_due(next_step))
        if sched.early_if_kept and sched.early_if_kept[0] < due:
            due = sched.early_if_kept[0]
        return max(due, next_step + 1)

    @property
    def sampling_step(self) -> int | None:
        """The step being sampled now, or None: the one answer for instruments that work on
        sampled steps only (ask after the step's opening boundary was handled)."""
        return self._active_step

    @property
    def samples(self) -> int:
        return self.schedule.samples

    @property
    def interval(self) -> int:
        return self.schedule.interval

    @property
    def _next_sample(self) -> float:
        return self.schedule.next_sample

    @_next_sample.setter
    def _next_sample(self, value: float) -> None:
        self.schedule.next_sample = value

    def on_first_optimizer_step(self, step_0_so_far: float, closure: bool) -> None:
        """The first optimizer step of a run, before step 0 is known to have ended (the
        tracker learns which optimizers make a step at the second one): when step 0 was
        long or the optimizer takes a closure, sample from here, so a run of 2 long steps
        (LBFGS) is sampled at all."""
        long = closure or step_0_so_far >= LONG_FIRST_STEP_S
        if long and self._active_step is None and self._next_sample > 1:
            self._next_sample = 1
            self._boundary(1, None)

    def close(self) -> None:
        """At exit: emit a step being sampled (``partial``) and remove everything."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._armed:  # its backward pass never came: nothing was sampled
                self._disarm()
            if self._active_step is not None:
                self._finish(None, partial=True)
        except Exception as exc:
            self._fail(exc)
        self._stop()

    def compile_in_use(self) -> None:
        """``torch.compile`` was called: module hooks go now (before Dynamo traces) for good.

        A torch whose ``TorchDispatchMode`` has no ``ignore_compile_internals`` (before
        2.9) does not compile while a dispatch mode is active: a compiled function first
        called on a sampled step would run eagerly there, with eager numerics. There op
        accounting switches itself off instead."""
        try:
            import torch._dynamo  # noqa: F401  (torch.compile loads it anyway: no extra cost)

            shield_from_dynamo()
        except Exception:
            pass
        if not _compile_ignores_mode():
            self._active_step = None  # a sample in progress is dropped, not reported
            self._step = None
            self._closed = True
            self._stop()
            try:
                self._emit(events.KIND_PROBE_ERROR, instrument="ops",
                           message="torch.compile is in use, and this torch does not compile while the op "
                                   "sampler's dispatch mode is active (ignore_compile_internals: torch >= 2.9)")
            except Exception:
                pass
            return
        self.modules_off("torch.compile is in use, and Dynamo must not see global module hooks; "
                         "ops are still counted, without module names")

    def modules_off(self, reason: str) -> None:
        """Stop naming modules for the rest of the run (hooks removed now) and say so once.

        Called outside any op (torch.compile's caller, a step boundary), where removing
        hooks is safe; a sample in progress goes on without module names."""
        if self._modules_off is not None:
            return
        self._modules_off = reason
        self._tracker.remove()
        self._tracker.reset_step()
        try:
            self._emit(events.KIND_PROBE_ERROR, instrument="ops modules", message=reason)
        except Exception:
            pass

    # -- sampling -----------------------------------------------------------------
    def _boundary(self, next_step: int, last: float | None) -> None:
        try:
            sched = self.schedule
            if self._armed:  # the step ended with no backward pass: nothing ran under the mode
                self._disarm()
            was_sampled = self._active_step is not None
            if was_sampled:
                self._finish(last)
            if next_step >= self._leaks.next_check and not self._failed:
                self._check_leaks(next_step)
            if sched.early_if_kept and next_step >= sched.early_if_kept[0]:
                sched.early_step_due(next_step, self._leaks.unsettled)
            if last is not None and not was_sampled:
                if last > sched.wake_above:
                    sched.outlier(next_step, last)
                sched.plain_step(next_step, last)
            if self._failed or self._closed:
                self._stop()
                return
            if sched.due(next_step):
                if self._from_backward:
                    self._arm(next_step, last)
                else:
                    self._begin(next_step, last)
        except Exception as exc:
            self._fail(exc)
            self._stop()

    def _begin(self, step: int, last: float | None = None) -> None:
        if os.getpid() != self._pid:
            self._next_sample = math.inf
            return
        if self._finder is None:
            self._finder = FrameFinder()
        self._reset_step()
        if self._step is not None:
            self._step.seed_device_locals(sys._getframe(1))
        if not self._push_mode():
            self._next_sample = step + 1  # a tracing (infra) mode is active: try later
            return
        self._pushed = True
        if self._modules_off is None and dynamo_used():
            self.modules_off("Dynamo compiled code in this process (module hooks would be traced)")
        if self._modules_off is None:
            self._tracker.install()
        self._patches.install()
        if self._warn_always and self._device_kind == "mps":
            self._warn_saved = torch.is_warn_always_enabled()
            torch.set_warn_always(True)
        self._active_step = step
        self._leaks.begin(step)
        self._t_begin = self._clock()
        self._cpu_begin = self._cpu_clock()
        ref = self.schedule.step_time() or (last or 0.0)
        self._time_cap = max(MIN_SAMPLE_CAP_S, SAMPLE_CAP_STEPS * ref) if ref > 0 else UNKNOWN_STEP_CAP_S
        if self.schedule.every_step:
            # every step sampled (benchmarks, tests): no plain step to measure the cap by, and the
            # previous sampled step's time is no reference (a loaded machine cut a sample of the
            # CTC/GRU example at 0.51 s and the samples after it went)
            self._time_cap = math.inf
        self._backward_began = self._began_at_backward = False
        self._anomaly = None
        self._safe.set(self._mark_backward, self._fail)  # at the step's first backward pass
        self._recording = True

    def _mark_backward(self) -> None:
        self._backward_began = True
        self._read_anomaly()

    def _read_anomaly(self) -> None:
        """At the sampled step's first backward pass: autograd's anomaly detection on? (A
        ``with detect_anomaly():`` around the backward call only is on here, and off at the
        step's boundaries; see ``probe/anomaly.py``.)"""
        from .anomaly import reading

        self._anomaly = reading()

    def _arm(self, step: int, last: float | None) -> None:
        """Sample ``step`` from its first backward pass on (the last sample was cut in its
        forward pass, so its backward ops were never seen): the backward hook's safe point
        begins it there, outside any op. Until then the step runs bare."""
        self._active_step = step
        self._armed = True
        self._safe.set(functools.partial(self._begin_armed, last), self._fail)

    def _begin_armed(self, last: float | None) -> None:
        step = self._active_step
        self._armed = False
        self._active_step = None
        if step is None:
            return
        self._begin(step, last)
        self._backward_began = self._began_at_backward = True
        self._read_anomaly()
        self._safe.clear()  # (its marker: this is the backward pass)

    def _disarm(self) -> None:
        self._armed = False
        self._active_step = None
        self._safe.clear()

    def _finish(self, last: float | None, partial: bool = False) -> None:
        t_end = self._clock()
        step = self._active_step
        self._teardown()
        self._active_step = None
        self._leaks.end(step if step is not None else 0)
        empty = self._step is None or not (self._step.agg or self._step.syncs)
        if step is None or self._failed or (partial and empty):
            return  # nothing ran since the last boundary (the loop ended): nothing to say
        host_s = last if last is not None else t_end - self._t_begin
        record = self._build(step, host_s)
        # a leak candidate seen once is not a settled census: sampling goes on at the full budget
        census = None if partial or self._leaks.unsettled else _census(self._step)
        ops = self._step.op_count if self._step is not None else 0
        self._step = None
        if partial:
            record["partial"] = True
        if self._truncated:
            record["truncated"] = True
        else:
            self._from_backward = False
        if self._began_at_backward:
            record["from_backward"] = True
        if self._anomaly is not None:
            record["anomaly"] = self._anomaly
        finish_cost = self._clock() - t_end
        # a sample cut short within a step (a boundary ended it) is measured as that step;
        # one that no boundary ended (an evaluation after the loop) is no step's: count what
        # it measured itself
        measurable = not self._truncated or last is not None
        if not measurable:
            finish_cost += self._bookkeeping
        sched = self.schedule
        cost_host_s = host_s
        if self._truncated and measurable:
            # what the step spent past the cut is the script's own (the mode was gone by the
            # next module call or backward pass): a mid-loop evaluation is not charged
            cost_host_s = min(host_s, sched.step_time() + self._recorded_s)
        # the thread's CPU time covers a CPU step's whole sample (backward runs in the calling
        # thread); on an accelerator the backward ops run in the autograd engine's thread
        cpu = self._cpu_clock() - self._cpu_begin if self._run_kind() == "cpu" else None  # the finish too
        record["overhead_s"] = sched.sampled(step, cost_host_s, finish_cost, census, measurable=measurable,
                                             ops=ops, cpu_s=cpu)
        record["interval"] = sched.interval
        record.update(sched.cost())  # type: ignore[typeddict-item]
        self._emit(events.KIND_OPS, **record)

    def _check_leaks(self, step: int) -> None:
        """Survivors of earlier sampled steps (see :mod:`.ops_leaks`); a few ms at most."""
        if os.getpid() != self._pid:
            return
        t0 = self._clock()
        found = self._leaks.check(step)
        if self._leaks.new_candidate is not None:
            self.schedule.follow_phase(step, self._leaks.new_candidate)
        if found:
            self._emit(events.KIND_LEAKS, **found)
        self.schedule.extra(self._clock() - t0)

    def _reset_step(self) -> None:
        self._tracker.reset_step()
        assert self._finder is not None
        self._step = StepRecord(self._tracker, self._finder, self._patches, self._info, self._carried, self._leaks,
                                self._device_kind)
        self._bookkeeping = 0.0
        self._truncated = False

    def _overrun(self) -> None:
        """A sample past its cap (``SAMPLE_CAP_STEPS``: a step of many tiny ops, or an
        evaluation after the loop, with no boundary to end it): stop recording now, remove
        the mode at the next point outside any op (``_release_later``), and report the
        sample as truncated."""
        self._recording = False
        self._truncated = True
        self._recorded_s = self._clock() - self._t_begin
        self._from_backward = not self._backward_began  # its backward ops: the next sample's
        self._release_later()

    def _stop(self) -> None:
        """Undo everything and sample no more (closed, failed)."""
        self._teardown()
        self._next_sample = math.inf
        self._leaks.next_check = math.inf

    def _release_later(self) -> None:
        """Remove the mode and hooks at the next point outside any op: a module call, or the
        start of a backward pass on this thread (see :mod:`.safe_point`)."""
        self._tracker.release.set(self._teardown, self._fail)
        self._safe.set(self._teardown, self._fail)

    def _teardown(self) -> None:
        """Undo everything sampling installed; safe to call at any boundary."""
        self._recording = False
        self._safe.clear()
        if self._pushed:
            self._pushed = False
            remove_mode(self._mode)
        self._tracker.remove()
        self._patches.remove()
        if self._finder is not None:
            self._finder.forget()
        if self._warn_saved is not None:
            torch.set_warn_always(self._warn_saved)
            self._warn_saved = None

    def _push_mode(self) -> bool:
        """Insert the mode at the bottom of the dispatch stack (see the module docstring)."""
        shield_from_dynamo()
        pass_higher_order_operators(self._hops_passed)
        return push_below(self._mode)

    # -- failure --------------------------------------------------------------------
    def _fail(self, exc: BaseException) -> None:
        """Switch off after one ``probe_error``. Nothing is removed here (this may run
        inside an op); the mode and hooks go at the next module call or step boundary."""
        if self._failed:
            return
        self._failed = True
        self._recording = False
        self._next_sample = math.inf
        self._release_later()  # or at the next boundary, if sooner
        try:
            self._emit(events.KIND_PROBE_ERROR, instrument="ops", **failure_fields(exc))
        except Exception:
            pass

    @property
    def failed(self) -> bool:
        return self._failed

    # -- recording (inside the mode) ----------------------------------------------------
    def _record(self, func: Any, args: Any, kwargs: dict[str, Any], out: Any, dt: float) -> None:
        step = self._step
        if step is None:
            return
        step.record(func, args, kwargs, out, dt)
        count = step.op_count
        if not count & 255 and count and (
            count >= MAX_OPS_PER_SAMPLE or self._clock() - self._t_begin > self._time_cap
        ):
            self._overrun()

    def _on_patched_call(self, kind: str, tensor: torch.Tensor) -> None:
        if not self._recording or self._step is None:
            return
        try:
            self._step.patched_call(kind, tensor)
        except Exception as exc:
            self._fail(exc)

    # -- the event --------------------------------------------------------------------
    def _run_kind(self) -> str:
        if self._device_kind:
            return self._device_kind
        model = self._tracker.model_device()
        if model:
            return model.split(":", 1)[0]
        if self._detected is None:
            from ..devices import detect_backend

            self._detected = detect_backend().kind
        return self._detected

    def _mps_check(self, op: str) -> bool:
        """Whether ``op`` runs on MPS: a kernel, and not MPSFallback.mm's CPU fallback
        registered on the MPS key (the dispatcher's record, so right for every release;
        a dump that cannot be read claims nothing)."""
        has = self._kernel_cache.get(op)
        if has is None:
            check = self._has_mps_kernel or default_has_mps_kernel
            has = bool(check(op))
            if has:
                try:
                    has = registered_from_mps_fallback(self._dispatch_dump(op)) is not True
                except Exception:
                    pass
            self._kernel_cache[op] = has
        return has

    def _build(self, step: int, host_s: float) -> OpsFields:
        assert self._step is not None
        record: OpsFields = {"step": step, "host_s": round(host_s, 7),
                                  "bookkeeping_s": round(self._bookkeeping, 7)}  # fmt: skip
        record.update(self._step.build(self._run_kind(), self._mps_check, self._mps_type))
        return record


def _compile_ignores_mode() -> bool:
    """Whether Dynamo compiles as usual while a mode saying ``ignore_compile_internals`` is active."""
    return callable(getattr(TorchDispatchMode, "ignore_compile_internals", None))


def _census(step: StepRecord | None) -> Any:
    """The step's census, or None when it cannot be built (an unhashable shape)."""
    try:
        return None if step is None else step.census()
    except Exception:
        return None


def _forked(ref: weakref.ref[OpAccountant]) -> None:
    """A forked child (a DataLoader worker) inherits a sampled step's mode, hooks and
    patches: remove them there and stay quiet."""
    acct = ref()
    if acct is not None:
        acct._recording = False
        acct._next_sample = math.inf
        acct._closed = True
        try:
            acct._teardown()
        except Exception:
            pass
