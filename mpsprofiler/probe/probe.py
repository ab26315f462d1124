"""The probe: everything mpsprof does inside the training process, wired together.

Each instrument is guarded: an exception inside one is reported once as a
``probe_error`` event and switches that instrument off; the training goes on unchanged.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from .. import events
from ..devices import DeviceBackend, backend_for
from ..devices.cpu import CpuBackend
from ..events.payloads import ByeFields, ExceptionFields, Frame, HelloFields, ModelFields
from ..redact import TEXT_KINDS, redact_env, scrub_fields
from . import fdguard, loader_sites
from .channel import Channel
from .failure_site import failure_fields
from .import_watch import ImportWatcher
from .loader_config import loader_config
from .steps import StepTracker
from .transparent import hide_from_warnings
from .weakids import WeakIds

_ACTIVE: Probe | None = None
AGGREGATE_EVERY = 2.0
"""Seconds between ``steps`` events once only aggregates are sent (see StepTracker)."""
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
        self.rank = _int_env("RANK") if os.environ.get("TORCHELASTIC_RUN_ID") or _int_env("WORLD_SIZE") else None
        """Distributed runs tag every event with the rank (``r``): one session per rank."""
        self.tracker = StepTracker(self.emit, self.backend, self.clock)
        self._last_drain = float("-inf")
        self._torch_env_sent = False
        self.sampler: Any = None
        self.ops: Any = None
        self.overrides: Any = None
        self.limit: Any = None
        self.loader_sites: Any = None
        self.thread_sites: Any = None
        self.compile_watch: Any = None
        self.warnings_hook: Any = None
        self.health: Any = None
        self.pins: Any = None
        """Pageable batches on CUDA (probe/copies.py)."""
        """The loss watch (probe/health.py); None until torch is imported."""
        self.device_timer: Any = None
        """Device busy time on sampled steps (probe/device_time.py)."""
        """Set once ``torch.compile`` is watched; global module hooks need it (see compiling)."""

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
        hello: HelloFields = {
            "schema": events.SCHEMA_VERSION,
            "pid": os.getpid(),
            "wall": time.time(),
            "rank": _int_env("RANK"),
            "local_rank": _int_env("LOCAL_RANK"),
            "world_size": _int_env("WORLD_SIZE"),
            "version": _version(),
        }
        self.emit(events.KIND_HELLO, **hello)
        try:
            # before any probe thread opens a file: the script's os.close/closerange must
            # never close one of ours and then see its own file closed by us (fdguard.py)
            self._uninstallers.append(fdguard.install())
        except Exception:
            pass
        if self.channel is not None:
            self.channel.on_flush(self._drain_steps)
        self._guarded("env", lambda: self._emit_environment(with_torch=False))
        self._guarded("overrides", self._install_experiment)
        self._guarded("warnings", self._install_warnings)
        if not self.options.get("no_memory"):
            self._guarded("memory", self._start_sampler)
        self._guarded("children", self._watch_children)
        if self.options.get("terminal_loan"):
            self._guarded("terminal", self._install_terminal_loan)
        # torch is imported by the script, never by us: a script that sets
        # PYTORCH_ENABLE_MPS_FALLBACK or OMP_NUM_THREADS before its own `import torch`
        # must see them take effect, and a script without torch must not pay for it
        if "torch" in sys.modules:
            self._on_torch_imported()
        else:
            self._torch_watch = ImportWatcher("torch", self._on_torch_imported)
            sys.meta_path.insert(0, self._torch_watch)
            self._uninstallers.append(self._torch_watch.remove)
        try:
            os.register_at_fork(after_in_child=self._after_fork)
        except Exception:
            pass
        atexit.register(self.close)

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
        self._guarded("steps", self._install_optimizer_hook)
        self._guarded("health", self._install_health)
        self._guarded("backward", self._install_backward_hook)
        self._guarded("dataloader", self._install_dataloader_hooks)
        self._guarded("env", self._install_thread_sites)
        if not self.options.get("no_ops"):
            self._guarded("ops", self._install_ops)
        # without op accounting (--no-ops, try's runs) both ride on health.fallback_sampled's steps
        self._guarded("device_time", self._install_device_timer)

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
        if tracker.index > tracker._detail_limit and now - self._last_drain < AGGREGATE_EVERY:
            return
        self._last_drain = now
        tracker.drain()

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
        self.disabled.update(INSTRUMENTS)
        self.tracker._lock = threading.Lock()

    def _emit_environment(self, with_torch: bool) -> None:
        from ..environment import collect_environment

        self.fault("env")
        if with_torch:
            facts = collect_environment()
            facts["pytorch_env"] = redact_env(facts.get("pytorch_env"))  # PYTORCH_HF_TOKEN=*** (redact.py)
            self.emit(events.KIND_ENV, **facts)
            return
        # before the script imports torch: the same facts, torch's left unknown for now
        blocked = "torch" not in sys.modules
        if blocked:
            sys.modules["torch"] = None  # type: ignore[assignment]  # `import torch` fails fast
        try:
            facts = collect_environment()
        finally:
            if blocked and sys.modules.get("torch", 0) is None:
                del sys.modules["torch"]
        facts["pytorch_env"] = redact_env(facts.get("pytorch_env"))
        self.emit(events.KIND_ENV, **facts)

    def _install_optimizer_hook(self) -> None:
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        tracker = self.tracker
        from .compiling import is_compiling

        # A compiled optimizer step (``torch.compile(opt.step)``, the "compiling the
        # optimizer" recipe) makes Dynamo inline these global hooks: they must be a no-op
        # it can trace (the step is then counted from the backward pass instead)
        def hook(optimizer: Any, args: Any, kwargs: Any) -> None:
            if "steps" in self.disabled or is_compiling():
                return
            try:
                self.fault("steps")
                if not self._model_seen:
                    self._on_first_model(optimizer)
                tracker.on_optimizer_step(optimizer)
            except Exception as exc:
                self.fail("steps", exc)
            self.check_limit()

        def pre_hook(optimizer: Any, args: Any, kwargs: Any) -> None:
            if is_compiling():
                return
            tracker.in_optimizer = True  # backward passes in a closure are the optimizer's
            # args holds the optimizer itself first, then step()'s own arguments
            if any(callable(a) for a in args[1:2]) or callable(kwargs.get("closure")):
                tracker.closure_step = True

        self._uninstallers.append(register_optimizer_step_post_hook(hook).remove)
        self._uninstallers.append(register_optimizer_step_pre_hook(pre_hook).remove)
        watch = self.compile_watch
        if watch is not None and not watch.in_use:
            remove_marker = tracker.start_marker()
            self._uninstallers.append(remove_marker)

            # gone before Dynamo traces anything; step 0 starts once torch.compile has
            # returned (it imports Dynamo first), if nothing started it before
            watch.listeners.append(remove_marker)
            watch.after.append(tracker._mark_start)

    def _install_compile_watch(self) -> None:
        from .compiling import CompileWatch

        watch = CompileWatch(lambda exc: self.fail("compile", exc))
        self._uninstallers.append(watch.install())
        self.compile_watch = watch

    def _install_backward_hook(self) -> None:
        from . import backward

        tracker = self.tracker

        # its own instrument: a failing backward hook leaves the optimizer's step counter on
        def on_backward(site: Any, start: float, end: float, reset: bool) -> None:
            if "backward" in self.disabled or "steps" in self.disabled:
                return
            self.fault("backward")
            try:
                self.fault("steps")  # the step tracker's own fault, as in its optimizer hook
            except Exception as exc:
                self.fail("steps", exc)
                return
            if not self._torch_env_sent:
                self._send_torch_environment()
            tracker.on_backward(site, end, reset, start)
            self.check_limit()  # SystemExit passes the wrapper's `except Exception`

        self._uninstallers.append(backward.install(on_backward, self.clock, lambda exc: self.fail("backward", exc),
                                                   self._on_backward_outputs if self.health is not None else None))

    def _install_health(self) -> None:
        """The loss check (probe/health.py); its reads ride on the op sampler's steps on
        an accelerator, so it is installed after ops would be (its decision is read lazily)."""
        from . import health

        self.health = health.LossWatch(
            self.emit, lambda: self.tracker.index,
            lambda: health.sampling_step(self.ops, self.tracker.index) == self.tracker.index)
        self._uninstallers.append(health.install(self.health, lambda exc: self.fail("health", exc)))

    def _install_device_timer(self) -> None:
        """Device busy time on the steps after op-sampled ones (probe/device_time.py);
        its listener runs after the op sampler's, so it sees that step's decision."""
        from . import health
        from .device_time import DeviceTimer

        timer = self.device_timer = DeviceTimer(self.emit, lambda: self.backend,
                                                lambda: health.sampling_step(self.ops, self.tracker.index), self.clock)

        def guarded(fn: Callable[[], None]) -> None:
            if "device_time" in self.disabled:
                return
            try:
                self.fault("device_time")
                fn()
            except Exception as exc:
                self.fail("device_time", exc)

        self.tracker.listeners.append(lambda i, d: guarded(lambda: timer.on_boundary(i, d)))
        self.tracker.fetch_listeners.append(lambda: guarded(timer.on_fetch_end))

    def _on_backward_outputs(self, outputs: Any) -> None:
        if "health" in self.disabled:
            return
        try:
            self.fault("health")
            self.health.on_backward(outputs)
        except Exception as exc:
            self.fail("health", exc)

    def _send_torch_environment(self) -> None:
        if self._torch_env_sent or "torch" not in sys.modules:
            return
        self._torch_env_sent = True
        self._guarded("env", lambda: self._emit_environment(with_torch=True))

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
        dtypes = sorted({str(p.dtype).replace("torch.", "") for p in params})
        devices = sorted({str(p.device) for p in params})
        model: ModelFields = {
            "device": str(device),
            "device_kind": device.type,
            "device_name": self.backend.name(),
            "devices": devices,
            "dtypes": dtypes,
            "parameters": int(sum(p.numel() for p in params)),
            "optimizer": type(optimizer).__name__,
            "torch_threads": _torch_threads(),
            "framework": _framework(),
            "fetched_ahead": self.tracker.retracted + self.tracker.held,
        }
        if self.thread_sites is not None and self.thread_sites.calls:
            model["threads_set"] = list(self.thread_sites.calls)
        self.emit(events.KIND_MODEL, **model)

    def _install_thread_sites(self) -> None:
        """Record the script's own ``torch.set_num_threads`` calls (probe/thread_sites.py)."""
        from . import thread_sites

        self.thread_sites = thread_sites.ThreadSites()
        self._uninstallers.append(thread_sites.install(self.thread_sites, lambda exc: self.fail("env", exc)))

    def _install_dataloader_hooks(self) -> None:
        from torch.utils.data import dataloader as dl

        base = dl._BaseDataLoaderIter
        orig_next = base.__next__
        orig_init = base.__init__
        tracker = self.tracker
        seen = WeakIds()  # never keeps a loader (and its persistent workers) alive
        probe = self
        sites = self.loader_sites = loader_sites.LoaderSites(lambda d: probe.emit(events.KIND_DATALOADER, **d))
        from .copies import PinCheck

        pins = self.pins = PinCheck(self.emit, lambda: self.backend.kind)

        def __next__(it: Any) -> Any:
            if "dataloader" in probe.disabled:
                return orig_next(it)
            try:
                probe.fault("dataloader")
                started = tracker.on_fetch_start()
            except Exception as exc:
                probe.fail("dataloader", exc)
                return orig_next(it)
            probe.check_limit()
            t0 = time.perf_counter()
            try:
                batch = orig_next(it)
            except StopIteration:
                _safe(lambda: tracker.on_fetch_end(started, False), probe)
                raise
            _safe(lambda: tracker.on_fetch_end(started, True), probe)
            _safe(lambda: sites.on_fetch(it, time.perf_counter() - t0, batch), probe)
            _safe(lambda: pins.on_batch(it, batch), probe)  # pageable batches on CUDA (probe/copies.py)
            return batch

        def __init__(it: Any, loader: Any, *args: Any, **kwargs: Any) -> None:
            orig_init(it, loader, *args, **kwargs)
            try:
                if "dataloader" not in probe.disabled:
                    number = seen.add(loader)
                    fields: dict[str, Any] | None = None
                    if number:
                        fields = {**loader_config(loader, number), **sites.site_fields(loader)}
                        probe.emit(events.KIND_DATALOADER, **fields)
                    sites.on_iter(it, loader, fields)
                    pins.on_iter(it, loader, number)
            except Exception as exc:
                probe.fail("dataloader", exc)

        # torch's warnings inside them (pin_memory without an accelerator, an
        # IterableDataset's wrong length) must name torch's caller, not these wrappers
        base.__next__ = hide_from_warnings(__next__)  # type: ignore[method-assign,assignment]
        base.__init__ = hide_from_warnings(__init__)  # type: ignore[method-assign,assignment]
        uninstall_sites = loader_sites.install_construction_hook(sites, lambda exc: probe.fail("dataloader", exc))

        def uninstall() -> None:
            base.__next__ = orig_next  # type: ignore[method-assign]
            base.__init__ = orig_init  # type: ignore[method-assign]
            uninstall_sites()

        self._uninstallers.append(uninstall)

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
        for install in (self.overrides.install_dataloader, self.overrides.install_threads):
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
        from .sampler import MemorySampler

        def before_sample() -> None:
            self.fault("memory")

        self.sampler = MemorySampler(self.emit, lambda: self.backend, self.clock,
                                     on_error=lambda exc: self.fail("memory", exc), before_sample=before_sample)
        self.sampler.start()

    def _install_ops(self) -> None:
        try:
            from .ops import OpAccountant
        except ImportError:
            return
        budget = float(self.options.get("ops_budget", 0.005))
        self.ops = OpAccountant(self.emit, budget=budget)
        ops = self.ops
        watch = self.compile_watch
        if watch is None:
            ops.modules_off("the torch.compile watch could not be installed")
        elif watch.in_use:
            ops.compile_in_use()
        else:
            watch.listeners.append(ops.compile_in_use)

        def listener(next_step: int, last: float) -> None:
            if "ops" in self.disabled:
                return
            try:
                self.fault("ops")
                ops.on_step_boundary(next_step, last)
            except Exception as exc:
                self.fail("ops", exc)

        def first_optimizer_step(so_far: float, closure: bool) -> None:
            if "ops" in self.disabled:
                return
            try:
                ops.on_first_optimizer_step(so_far, closure)
            except Exception as exc:
                self.fail("ops", exc)

        self.tracker.listeners.append(listener)
        self.tracker.first_optimizer_listeners.append(first_optimizer_step)

    # -- public API -------------------------------------------------------------
    def mark_step(self) -> None:
        try:
            if not self._torch_env_sent:
                self._send_torch_environment()
            self.tracker.manual_step()
        except Exception as exc:
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
        self.emit(events.KIND_EXCEPTION, **fields)

    def close(self) -> None:
        """Flush everything at exit; idempotent (atexit and the boot both call it)."""
        if self._closed or os.getpid() != self._pid:
            return
        self._closed = True
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
            self.emit(events.KIND_HEALTH, **self.health.summary())
        if self.device_timer is not None and "device_time" not in self.disabled:
            self.device_timer.close()
        if self.pins is not None and "dataloader" not in self.disabled:
            self.pins.close()

    def _bye(self, note: ByeFields | None) -> bytes:
        """The channel's last line: nothing follows; with what was dropped, and why (then
        the recording is incomplete)."""
        fields: ByeFields = {**note} if note else {}
        if self.rank is not None:
            fields["r"] = self.rank
        return events.encode(events.KIND_BYE, self.clock(), **fields)


def _safe(fn: Callable[[], None], probe: Probe) -> None:
    try:
        fn()
    except Exception as exc:
        probe.fail("dataloader", exc)


def _int_env(name: str) -> int | None:
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None


def _version() -> str:
    try:
        from .. import __version__

        return __version__
    except Exception:
        return "?"


def _framework() -> str | None:
    try:
        from .frameworks import detect

        return detect()
    except Exception:
        return None


def _torch_threads() -> int | None:
    """Threads at the first step: the script may have called torch.set_num_threads."""
    try:
        import torch

        return int(torch.get_num_threads())
    except Exception:
        return None
