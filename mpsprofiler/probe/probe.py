"""The probe: everything mpsprof does inside the training process, wired together.

Each instrument is guarded: an exception inside one is reported once as a
``probe_error`` event and switches that instrument off; the training goes on unchanged.

This module owns the probe's state (the channel, the switched-off instruments, the step
tracker) and decides what is installed when. The larger pieces live beside it and are
handed the probe's callables (``emit``, ``fault``, ``fail``, ``clock``...), never the
probe itself: the optimizer and backward hooks (``step_hooks.py``), the DataLoader hooks
(``loader_hooks.py``), the ``hello`` / ``env`` / ``model`` facts (``run_facts.py``), the
torch import watch (``import_watch.py``), ``--set`` (``overrides.py``) and the step limits
(``limits.py``).
"""

from __future__ import annotations

import atexit
import functools
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Collection
from typing import Any

from .. import events
from ..devices import DeviceBackend, backend_for
from ..devices.cpu import CpuBackend
from ..events.payloads import ByeFields, ExceptionFields, Frame
from ..redact import TEXT_KINDS, scrub_fields
from . import fdguard
from .backward_sampling import BackwardSampling, stop_sampling
from .channel import Channel
from .failure_site import failure_fields
from .frameworks import in_training, planned_steps
from .import_watch import when_imported
from .run_facts import emit_environment, hello_fields, int_env, model_fields
from .safe_point import SafePoint
from .steps import StepTracker

_ACTIVE: Probe | None = None
AGGREGATE_EVERY = 2.0
"""Seconds between ``steps`` events once only aggregates are sent (see StepTracker)."""
AGG_ROWS_MAX = 16_384
"""Steps past the detail held for one ``steps`` event at most: sent sooner than
``AGGREGATE_EVERY`` past it (a loop of 50 µs steps), so the rows held and the packed line
(~1.9 MB of base64 at this count; the reader skips lines over 8 MiB) stay bounded."""
INSTRUMENTS = ("env", "steps", "backward", "dataloader", "warnings", "memory", "ops", "children", "health",
               "device_time")


def active() -> Probe | None:
    return _ACTIVE


class Probe:
    def __init__(self, channel: Channel | None, options: dict[str, Any] | None = None) -> None:
        self.options = options or {}
        self.channel = channel
        self.secrets: list[str] = []
        """Secret argument values of the script (set by the boot) masked in recorded texts."""
        self._t0 = time.perf_counter()
        self.clock: Callable[[], float] = lambda: time.perf_counter() - self._t0
        self.backend: DeviceBackend = CpuBackend()
        self.disabled: set[str] = set()
        faults = self.options.get("fault") or ()
        self._faults = frozenset([faults] if isinstance(faults, str) else faults)
        self._uninstallers: list[Callable[[], None]] = []
        self._closed = False
        self._model_seen = False
        self._pid = os.getpid()
        self.rank = int_env("RANK") if os.environ.get("TORCHELASTIC_RUN_ID") or int_env("WORLD_SIZE") else None
        """Distributed runs tag every event with the rank (``r``): one session per rank."""
        # the tracker reads time.perf_counter itself (a C call, several times a step) and
        # takes the start time off where it sends a step (StepTracker's ``origin``)
        self.tracker = StepTracker(self.emit, self.backend, time.perf_counter, origin=self._t0)
        self.safe_point = SafePoint()
        """The op sampler's change pending outside any op, made by the backward hook too."""
        self._last_drain = float("-inf")
        self._torch_env_sent = False
        self.sampler: Any = None
        self.ops: Any = None
        self.overrides: Any = None
        self.limit: Any = None
        self.loader_sites: Any = None
        self.thread_sites: Any = None
        self._device_listeners: tuple[Any, Any] | None = None
        """The device timer's step and fetch listeners (see ``_drop_device_listeners``)."""
        self.compile_watch: Any = None  # set once torch.compile is watched; global module hooks need it
        self.warnings_hook: Any = None
        self.health: Any = None  # the loss watch (probe/health.py); None until torch is imported
        self.backward_sampling: BackwardSampling | None = None
        """Which steps' backward passes the wrapper sees (probe/backward_sampling.py)."""
        self.pins: Any = None  # pageable batches on CUDA (probe/copies.py PinCheck)
        self.copy_timer: Any = None  # host-to-device copy time on op-sampled steps (probe/copies.py CopyTimer)
        self.device_timer: Any = None  # device busy time on sampled steps (probe/device_time.py)
        self.worker_startups: Any = None  # forked DataLoader workers' start-up CPU (probe/worker_startup.py)
        self._stop_inline_wakes: Callable[[], None] | None = None
        """Removes the inline channel's wakes outside the steps (probe/inline_wakes.py)."""

    # -- emitting ---------------------------------------------------------------
    def emit(self, kind: str, **fields: Any) -> None:
        channel = self.channel
        if channel is None or os.getpid() != self._pid:
            return
        if self.rank is not None:
            fields["r"] = self.rank
        if self.secrets and kind in TEXT_KINDS:  # a message quoting a secret argument
            fields = scrub_fields(fields, self.secrets)
        try:
            channel.send(events.encode(kind, self.clock(), **fields))
        except Exception:
            pass

    def fail(self, instrument: str, exc: BaseException) -> None:
        """Switch an instrument off and say so once."""
        if instrument in self.disabled:
            return
        self.disabled.add(instrument)
        self.emit(events.KIND_PROBE_ERROR, instrument=instrument, **failure_fields(exc))
        if instrument == "steps" and self.tracker is not None:
            # the optimizer hook (and with it the backward one) is off: the DataLoader is the only signal left
            try:
                self.tracker.no_training_signal()
            except Exception:
                pass

    # -- installation -----------------------------------------------------------
    def install(self) -> None:
        global _ACTIVE
        _ACTIVE = self
        self.emit(events.KIND_HELLO, **hello_fields())
        try:
            # before any probe thread opens a file: the script's os.close/closerange must
            # never close one of ours and then see its own file closed by us (fdguard.py)
            self._uninstallers.append(fdguard.install())
        except Exception:
            pass
        if self.channel is not None:
            self.tracker.wakes = self.channel
            self.channel.on_flush(self._drain_steps)
            if self.channel.inline:
                self._wake_inline(self.channel)
        self._guarded("env", lambda: emit_environment(self.emit, self.fault, with_torch=False))
        self._guarded("overrides", self._install_experiment)
        self._guarded("warnings", self._install_warnings)
        if not self.options.get("no_memory"):
            self._guarded("memory", self._start_sampler)
        self._guarded("children", self._watch_children)
        if self.options.get("terminal_loan"):
            self._guarded("terminal", self._install_terminal_loan)
        # torch is imported by the script, never by us (see import_watch.when_imported)
        remove_watch = when_imported("torch", self._on_torch_imported)
        if remove_watch is not None:
            self._uninstallers.append(remove_watch)
        try:
            os.register_at_fork(after_in_child=self._after_fork)
        except Exception:
            pass
        atexit.register(self.close)

    def _wake_inline(self, channel: Channel) -> None:
        """The channel has no thread (probe/channel.py): it wakes at the step boundary
        (the tracker's ``_close``) and, outside the steps, from the garbage collector and
        the DataLoader's fetches (probe/inline_wakes.py), until it starts its thread."""
        from . import inline_wakes

        self.tracker.inline_channel = channel
        self._stop_inline_wakes = inline_wakes.install(channel, self.tracker, self._locked)
        channel.when_threaded(functools.partial(setattr, self.tracker, "inline_channel", None))

    def _locked(self) -> bool:
        """A lock that the inline channel's wake takes is held (on this thread: it has no
        other): the wake's drains and sample would wait for it forever."""
        for owner in (self.channel, self.sampler, self.tracker, self.loader_sites):
            lock = getattr(owner, "_lock", None)
            if lock is not None and lock.locked():
                return True
        return self.channel is not None and self.channel.busy()

    def _no_inline_wakes(self) -> None:
        """No wake on this thread from now on (the exit's close, or a forked child)."""
        self.tracker.inline_channel = None
        stop, self._stop_inline_wakes = self._stop_inline_wakes, None
        if stop is not None:
            stop()

    def _watch_children(self) -> None:
        from . import children

        def emit(**fields: Any) -> None:
            self.emit(events.KIND_CHILD, **fields)

        self._uninstallers.append(children.install(emit, lambda exc: self.fail("children", exc)))

    def _install_terminal_loan(self) -> None:
        """TUI mode: input() and breakpoint() borrow the terminal (probe/terminal.py)."""
        from .terminal import TerminalLoan

        def ask(want: bool) -> None:
            self.emit(events.KIND_TERMINAL, want=want)
            if self.channel is not None:
                # the script blocks in input() until the app answers: no hook wakes an inline channel
                self.channel.go_threaded("the terminal loan")
                self.channel.flush_soon()

        TerminalLoan(ask).install()

    def _on_torch_imported(self) -> None:
        """Install the torch instruments once the script's ``import torch`` has finished.

        torch's own facts (``cuda.is_available()`` initialises the CUDA driver, which
        reads ``CUDA_VISIBLE_DEVICES`` once) wait for the first step or the exit, so a
        script that picks its devices after ``import torch`` still gets the ones it picked.
        The ``torch.compile`` watch comes first: without it no global module hook is
        installed at all (one Dynamo would trace breaks compiled scripts).
        """
        if self.overrides is not None:
            self._guarded("overrides", self._install_torch_overrides)
        self._guarded("compile", self._install_compile_watch)
        self._guarded("health", self._install_health)  # before the optimizer hook, which feeds it
        self._guarded("steps", self._install_optimizer_hook)
        self._guarded("backward", self._install_backward_hook)
        self._guarded("dataloader", self._install_dataloader_hooks)
        self._guarded("env", self._install_thread_sites)
        if not self.options.get("no_ops"):
            self._guarded("ops", self._install_ops)
        if self.ops is None and self.backward_sampling is not None:
            from .health import next_fallback_sampled

            # the loss check's own sampled steps (no op sampler's safe point marks them)
            self.backward_sampling.extra_next = next_fallback_sampled
        # without op accounting (--no-ops, try's runs) both ride on health.fallback_sampled's steps
        self._guarded("device_time", self._install_device_timer)

    def _hook_fault(self) -> Callable[[str], None] | None:
        """``fault`` for the per-step hooks, or None when no fault is injected (every run
        but the tests'): they skip the call then."""
        return self.fault if self._faults else None

    def _hook_limit(self) -> Callable[[], None] | None:
        """``check_limit`` for the per-step hooks, or None without ``--max-steps`` /
        ``--max-seconds`` (the limit is set up before any hook is installed)."""
        return self.check_limit if self.limit is not None else None

    def fault(self, instrument: str) -> None:
        """For tests only: ``MPSPROF_OPTIONS={"fault": ["steps", ...]}`` makes that
        instrument raise inside its hook, to prove a failing instrument harms nothing."""
        if instrument in self._faults:
            raise RuntimeError(f"injected fault in {instrument} (test option)")

    def _drain_steps(self) -> None:
        """Send pending steps; past the detail limit only every ``AGGREGATE_EVERY`` s.

        Aggregates are exact however rarely they go out, so a long run's recording
        grows by one small ``steps`` event per couple of seconds, not four a second.
        """
        tracker = self.tracker
        now = self.clock()
        if (tracker.index > tracker._detail_limit and now - self._last_drain < AGGREGATE_EVERY
                and tracker.aggregated_pending < AGG_ROWS_MAX):
            tracker.drain(send=False)  # the closed steps into the aggregate now, sent later
            return
        self._last_drain = now
        tracker.drain()

    def _fold_loader_sums(self) -> None:
        """The DataLoader batches logged since the channel's last wake, into the per-loader
        sums (loader_sites.LoaderSites.fold); a failure switches the instrument off."""
        self._guarded("dataloader", self.loader_sites.fold)

    def _guarded(self, name: str, fn: Callable[[], None]) -> None:
        if name in self.disabled:
            return  # switched off by an earlier failure: stays off
        try:
            fn()
        except Exception as exc:
            self.fail(name, exc)

    def _after_fork(self) -> None:
        # fork-started DataLoader workers inherit the hooks; nothing they do is the step.
        # A lock another thread held at fork() stays held in the child: switch off every
        # instrument there, so a forked process that trains never waits on one.
        self.channel = None
        self._no_inline_wakes()
        self.disabled.update(INSTRUMENTS)
        self.tracker._lock = threading.Lock()
        if self.loader_sites is not None:
            self.loader_sites.after_fork()

    def _install_optimizer_hook(self) -> None:
        """Steps end at ``optimizer.step()`` (probe/step_hooks.py)."""
        from .step_hooks import install_optimizer_hooks

        # the backward wrapper's swaps ride on this hook (probe/backward_sampling.py)
        self.backward_sampling = BackwardSampling(self.tracker, self.safe_point, self.health)
        install_optimizer_hooks(self.tracker, self.compile_watch, self.disabled, self._hook_fault(), self.fail,
                                self._first_step, self._hook_limit(), self._uninstallers.append, self.health,
                                self.backward_sampling)

    def _install_compile_watch(self) -> None:
        from .compiling import CompileWatch

        watch = CompileWatch(lambda exc: self.fail("compile", exc))
        self._uninstallers.append(watch.install())
        self.compile_watch = watch

    def _install_backward_hook(self) -> None:
        """Backward passes, timed for the step tracker (probe/step_hooks.py)."""
        from .step_hooks import install_backward_hook

        self._uninstallers.append(install_backward_hook(
            self.tracker, self.disabled, self._hook_fault(), self.fail, time.perf_counter, self._send_torch_environment,
            self._hook_limit(), self.health, self.safe_point, self.backward_sampling))

    def _install_health(self) -> None:
        """The loss check (probe/health.py); its reads ride on the op sampler's steps on
        an accelerator, so it is installed after ops would be (its decision is read lazily)."""
        from . import health

        # the step read at every check: ``getattr`` through a partial is a C call, a lambda a frame
        self.health = health.LossWatch(
            self.emit, functools.partial(getattr, self.tracker, "index"),
            lambda: health.sampling_step(self.ops, self.tracker.index) == self.tracker.index)
        self._uninstallers.append(health.install(self.health, lambda exc: self.fail("health", exc)))

    def _install_device_timer(self) -> None:
        """Device busy time on the steps after op-sampled ones (probe/device_time.py);
        its listener runs after the op sampler's, so it sees that step's decision."""
        from . import health
        from .device_time import DeviceTimer

        timer = self.device_timer = DeviceTimer(self.emit, lambda: self.backend,
                                                lambda: health.sampling_step(self.ops, self.tracker.index), self.clock)

        disabled, faults = self.disabled, self._faults

        def on_boundary(i: int, d: float) -> None:  # at every step: no closure made per call
            if "device_time" in disabled:
                return
            try:
                if faults:
                    self.fault("device_time")
                if self.backend.asynchronous:  # what on_boundary asks first: nothing to time on a CPU
                    timer.on_boundary(i, d)
            except Exception as exc:
                self.fail("device_time", exc)

        def on_fetch_end() -> None:
            if "device_time" in disabled:
                return
            try:
                if faults:
                    self.fault("device_time")
                if self.backend.asynchronous:  # as on_boundary: nothing is held on a CPU
                    timer.on_fetch_end()
            except Exception as exc:
                self.fail("device_time", exc)

        self.tracker.listeners.append(on_boundary)
        self.tracker.fetch_listeners.append(on_fetch_end)
        self._device_listeners = (on_boundary, on_fetch_end)

    def _drop_device_listeners(self) -> None:
        """The training's device is known and not asynchronous (a CPU): nothing to time, ever
        (the backend is set once), so the timer's two per-step calls go."""
        listeners = self._device_listeners
        if listeners is None:
            return
        self._device_listeners = None
        on_boundary, on_fetch_end = listeners
        if on_boundary in self.tracker.listeners:
            self.tracker.listeners.remove(on_boundary)
        if on_fetch_end in self.tracker.fetch_listeners:
            self.tracker.fetch_listeners.remove(on_fetch_end)

    def _send_torch_environment(self) -> bool:
        """Torch's facts, once (at the first step or the exit); True once sent."""
        if self._torch_env_sent or "torch" not in sys.modules:
            return self._torch_env_sent
        self._torch_env_sent = True
        self._guarded("env", lambda: emit_environment(self.emit, self.fault, with_torch=True))
        return True

    def _first_step(self, optimizer: Any) -> bool:
        """At an optimizer step until the model is seen; True once it is (no more calls)."""
        if not self._model_seen:
            self._on_first_model(optimizer)
        return self._model_seen

    def _on_first_model(self, optimizer: Any) -> None:
        """The first optimizer step says which device the training really uses."""
        self._model_seen = True
        self._send_torch_environment()
        params = [p for group in optimizer.param_groups for p in group.get("params", [])]
        if not params:
            return
        device = params[0].device
        self.backend = backend_for(device.type, device.index)
        self.tracker.backend = self.backend
        if not self.backend.asynchronous:
            self._drop_device_listeners()
        if self.backend.kind != "cuda" and self.pins is not None:
            self.pins.not_on_cuda()  # (pageable batches matter on CUDA only: probe/copies.py)
        threads_set = list(self.thread_sites.calls) if self.thread_sites is not None else None
        self.emit(events.KIND_MODEL, **model_fields(optimizer, params, self.backend,
                                                    self.tracker.retracted + self.tracker.held, threads_set))

    def _install_thread_sites(self) -> None:
        """Record the script's own ``torch.set_num_threads`` calls (probe/thread_sites.py)."""
        from . import thread_sites

        self.thread_sites = thread_sites.ThreadSites()
        self._uninstallers.append(thread_sites.install(self.thread_sites, lambda exc: self.fail("env", exc)))
        from . import anomaly  # the script's line that turns autograd's anomaly detection on

        self._uninstallers.append(anomaly.install(lambda exc: self.fail("env", exc)))

    def _install_dataloader_hooks(self) -> None:
        """Batch waits, loader call sites and pageable batches (probe/loader_hooks.py)."""
        from . import loader_hooks

        self.loader_sites, self.pins, uninstall = loader_hooks.install(
            self.tracker, self.disabled, self.emit, self._hook_fault(), self.fail, self._hook_limit(),
            lambda: self.backend.kind)
        self._uninstallers.append(uninstall)
        if self.channel is not None:  # the per-loader sums are folded at the channel's wakes
            self.channel.on_flush(self._fold_loader_sums)
        from . import worker_startup

        self.worker_startups = worker_startup.StartupTable()  # before any worker forks: they share it
        self._uninstallers.append(worker_startup.install(self.worker_startups))

    def _install_experiment(self) -> None:
        """``--set`` changes and ``--max-steps`` / ``--max-seconds`` (see overrides.py, limits.py)."""
        settings = self.options.get("settings") or {}
        if settings:
            from .overrides import Overrides

            self.overrides = Overrides(settings, self.emit, lambda exc: self.fail("overrides", exc))
            listener = self.overrides.cache_listener(lambda: self.backend)
            if listener is not None:
                self.tracker.listeners.append(listener)
        max_steps, max_seconds = self.options.get("max_steps"), self.options.get("max_seconds")
        if max_steps or max_seconds:
            from .limits import StepLimit

            self.limit = StepLimit(max_steps, max_seconds, self.emit, self.clock, lambda: self._closed)
            self.tracker.listeners.append(self.limit.listener)

    def _install_torch_overrides(self) -> None:
        for install in (self.overrides.install_dataloader, self.overrides.install_threads,
                        self.overrides.install_anomaly):
            uninstall = install()
            if uninstall is not None:
                self._uninstallers.append(uninstall)

    def _install_warnings(self) -> None:
        from . import warnings_hook

        def on_error(name: str, exc: BaseException) -> None:
            self.fail(name, exc)

        def check() -> bool:
            if "warnings" in self.disabled:
                return False
            self.fault("warnings")
            return True

        hook = warnings_hook.install(self.emit, on_error, check)
        self._uninstallers.append(hook)
        self.warnings_hook = hook
        if self.channel is not None:  # repeats counted, the counts sent at each flush
            self.channel.on_flush(hook.flush)

    def _start_sampler(self) -> None:
        """The memory sampler, at the channel's wakes (no channel: nothing to send to)."""
        if self.channel is None:
            return
        from .sampler import MemorySampler

        def before_sample() -> None:
            self.fault("memory")

        def startups() -> dict[int, tuple[int, float]]:
            table = self.worker_startups
            return table.take() if table is not None else {}

        self.sampler = MemorySampler(self.emit, lambda: self.backend, self.clock,
                                     on_error=lambda exc: self.fail("memory", exc), before_sample=before_sample,
                                     startups=startups)
        self.sampler.start(self.channel)

    def _install_ops(self) -> None:
        try:
            from .ops import OpAccountant
            from .ops_schedule import DEFAULT_BUDGET
        except ImportError:
            return
        budget = float(self.options.get("ops_budget", DEFAULT_BUDGET))
        self.ops = OpAccountant(self.emit, budget=budget, safe_point=self.safe_point)
        ops = self.ops
        from .copies import install_copy_timer

        self.copy_timer, uninstall = install_copy_timer(self.emit, lambda: self.tracker.index)
        self._uninstallers.append(uninstall)
        watch = self.compile_watch
        if watch is None:
            ops.modules_off("the torch.compile watch could not be installed")
        elif watch.in_use:
            ops.compile_in_use()
        else:
            watch.listeners.append(ops.compile_in_use)

        def listener(next_step: int, last: float, skipped: Collection[float] = ()) -> tuple[float, float]:
            if "ops" in self.disabled:
                return math.inf, math.inf
            try:
                self.fault("ops")
                due: tuple[float, float] = ops.on_step_boundary(next_step, last, skipped)
                return due
            except Exception as exc:
                self.fail("ops", exc)
            return math.inf, math.inf

        # at the steps it asks for (the tracker's due listener): the accountant's own boundary
        # function, which switches op accounting off itself on any failure (one probe_error,
        # as fail() sends); the wrapper only where a test injects faults
        boundary = listener if self._faults else ops.on_step_boundary

        def first_optimizer_step(so_far: float, closure: bool) -> None:
            if "ops" in self.disabled:
                return
            try:
                ops.schedule.plan(planned_steps())  # a framework's announced run length
                ops.on_first_optimizer_step(so_far, closure)
            except Exception as exc:
                self.fail("ops", exc)
                self.tracker.set_due_listener(None)

        self.tracker.set_due_listener(boundary)
        self.tracker.first_optimizer_listeners.append(first_optimizer_step)

    # -- public API -------------------------------------------------------------
    def mark_step(self) -> None:
        try:
            if not self._torch_env_sent:
                self._send_torch_environment()
            self.tracker.manual_step()
            if self.backward_sampling is not None:
                self.backward_sampling.on_step()
        except Exception as exc:
            stop_sampling(self.backward_sampling)
            self.fail("steps", exc)
        self.check_limit()

    def check_limit(self) -> None:
        """End the script if ``--max-steps`` / ``--max-seconds`` was reached (see limits.py).
        Call it after a step-tracker hook has returned, never from inside one."""
        if self.limit is not None and self.limit.pending:
            self.limit.check()

    def record_exception(self, exc: BaseException, frames: list[Frame]) -> None:
        fields: ExceptionFields = {
            "type": type(exc).__name__,
            "module": type(exc).__module__,
            "message": str(exc)[:8000],
            "frames": frames,
        }
        try:  # before the exit confirms them: batches fetched for a first step that crashed
            self.tracker.crashed(in_training(exc.__traceback__))
        except Exception as error:
            self.fail("steps", error)
        self.emit(events.KIND_EXCEPTION, **fields)

    def close(self) -> None:
        """Flush everything at exit; idempotent (atexit and the boot both call it)."""
        if self._closed or os.getpid() != self._pid:
            return
        self._closed = True
        self._no_inline_wakes()  # what is left goes out below, in order
        self._send_torch_environment()
        finishers: tuple[tuple[str, Callable[[], object]], ...] = (
            ("steps", self.tracker.finish),
            ("ops", lambda: self.ops.close() if self.ops is not None else None),
            ("memory", lambda: self.sampler.stop() if self.sampler is not None else None),
            ("dataloader", lambda: self.loader_sites.flush() if self.loader_sites is not None else None),
            ("warnings", lambda: self.warnings_hook.flush() if self.warnings_hook is not None else None),
            ("health", self._health_summary),
        )
        for name, fn in finishers:
            try:
                fn()
            except Exception as exc:
                self.fail(name, exc)
        if self.sampler is not None and "memory" not in self.disabled:
            try:
                self.sampler.sample()  # the end state, for peak figures
            except Exception:
                pass
        try:
            self.tracker.drain()
        except Exception:
            pass
        if self.channel is not None:
            self.channel.close(last=self._bye)

    def _health_summary(self) -> None:
        if self.health is not None and "health" not in self.disabled:
            self.health.close()  # the losses the ring still holds (probe/loss_ring.py)
            self.emit(events.KIND_HEALTH, **self.health.summary())
        if self.device_timer is not None and "device_time" not in self.disabled:
            self.device_timer.close()
        if self.pins is not None and "dataloader" not in self.disabled:
            self.pins.close()
        if self.copy_timer is not None and "ops" not in self.disabled:
            self.copy_timer.close()

    def _bye(self, note: ByeFields | None) -> bytes:
        """The channel's last line: nothing follows; with what was dropped, and why (then
        the recording is incomplete)."""
        fields: ByeFields = {**note} if note else {}
        if self.rank is not None:
            fields["r"] = self.rank
        return events.encode(events.KIND_BYE, self.clock(), **fields)
