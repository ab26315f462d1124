"""The optimizer and backward hooks: where the step tracker learns that a step ended.

Split from the probe (``probe/probe.py``) so the wiring there stays readable; like
``overrides.py`` and ``limits.py`` this module is handed the probe's callables (``fault``,
``fail``, ``check_limit``...) rather than the probe itself, so it cannot reach into the
probe's state and the probe stays the one place that owns it.

``disabled`` is the probe's live set of switched-off instruments: it is only read here,
at every hook call, so an instrument switched off later is off here too. ``fault`` and
``check_limit`` are None when there is nothing to check (no injected fault, no step
limit): these hooks run at every step, and each call they skip counts.
"""

from __future__ import annotations

from collections.abc import Callable, Set
from typing import Any

from .backward_sampling import BackwardSampling, stop_sampling
from .safe_point import SafePoint
from .steps import StepTracker

Fault = Callable[[str], None]
Fail = Callable[[str, BaseException], None]


def install_optimizer_hooks(tracker: StepTracker, watch: Any, disabled: Set[str], fault: Fault | None, fail: Fail,
                            first_step: Callable[[Any], bool], check_limit: Callable[[], None] | None,
                            keep: Callable[[Callable[[], None]], None], health: Any = None,
                            sampling: BackwardSampling | None = None) -> None:
    """Count a step at every ``optimizer.step()``; each uninstaller is handed to ``keep``
    as soon as there is one (a failure halfway leaves nothing behind it cannot undo).

    ``first_step(optimizer)`` runs at each step until it returns True (it has seen the
    model: one call less per step from then on); ``check_limit`` runs after the tracker
    has taken the step, never inside it (``--max-steps``, see limits.py). ``watch`` is
    the ``torch.compile`` watch (``compiling.CompileWatch``) or None. ``health`` is the
    loss watch (probe/health.py) or None: the same post-hook tells it which optimizer
    stepped (its own instrument, ``"health"``), so a step pays for one global hook and
    one ``is_compiling`` call, not two. ``sampling`` (probe/backward_sampling.py) swaps the
    backward wrapper in or out for the next step, after the tracker has taken this one.

    The pre-hook is needed only until the tracker counts optimizer steps (or
    ``mpsprofiler.step()`` calls): it marks backward passes inside an optimizer step and
    a step that takes a closure, which the tracker reads before its mode is known only
    (``StepTracker.on_backward``, its first-optimizer-step listeners), and that mode never
    goes back. The post-hook removes it then (at the first optimizer step, as a rule
    before anything compiles: Dynamo guards on the hooks it inlined into a compiled
    ``optimizer.step``, so a removal after that costs that step one recompile).
    """
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

    from .compiling import fast_is_compiling

    is_compiling = fast_is_compiling()  # these hooks run at every step

    # A compiled optimizer step (``torch.compile(opt.step)``, the "compiling the
    # optimizer" recipe) makes Dynamo inline these global hooks: they must be a no-op
    # it can trace (the step is then counted from the backward pass instead)
    pending_first = [True]
    pre_handle: list[Any] = []
    # bound once, read at every step (issue 34); the first steps' work (the model, and an
    # injected fault in tests) behind one test of ``first``
    on_optimizer_step = tracker.on_optimizer_step
    safe = sampling.safe if sampling is not None else SafePoint()
    first = [True]

    def hook(optimizer: Any, args: Any, kwargs: Any) -> None:
        if is_compiling():
            return
        if "steps" not in disabled:
            try:
                if first[0]:
                    if fault is not None:
                        fault("steps")
                    if pending_first[0] and first_step(optimizer):
                        pending_first[0] = False
                        first[0] = fault is not None
                on_optimizer_step(optimizer)
                # BackwardSampling.on_step's own first test, here: most steps make no call
                if sampling is not None and (tracker.index >= sampling.call_at or safe.pending is not None):
                    sampling.on_step()
                if pre_handle and (tracker.mode == "optimizer" or tracker.mode == "manual"):
                    pre_handle.pop().remove()  # its work is done (see above)
            except Exception as exc:
                stop_sampling(sampling)
                fail("steps", exc)
            if check_limit is not None:
                check_limit()
        elif sampling is not None and not sampling.off:
            stop_sampling(sampling)  # no step is taken here now: no more swaps, every pass instrumented
        # the loss watch keeps the stepping optimizer for its report (the learning rate), made
        # where it reads a loss: not on a step whose passes run bare (backward_sampling.py)
        if health is not None and (sampling is None or not sampling.bare_next) and "health" not in disabled:
            try:
                health.on_optimizer(optimizer)
            except Exception as exc:
                fail("health", exc)

    def pre_hook(optimizer: Any, args: Any, kwargs: Any) -> None:
        if is_compiling():
            return
        tracker.in_optimizer = True  # backward passes in a closure are the optimizer's
        # args holds the optimizer itself first, then step()'s own arguments
        if (len(args) > 1 and callable(args[1])) or (kwargs and callable(kwargs.get("closure"))):
            tracker.closure_step = True

    keep(register_optimizer_step_post_hook(hook).remove)
    handle = register_optimizer_step_pre_hook(pre_hook)
    keep(handle.remove)
    pre_handle.append(handle)
    if watch is not None and not watch.in_use:
        remove_marker = start_marker(tracker)
        keep(remove_marker)

        # gone before Dynamo traces anything; step 0 starts once torch.compile has
        # returned (it imports Dynamo first), if nothing started it before
        watch.listeners.append(remove_marker)
        watch.after.append(tracker._mark_start)


def install_backward_hook(tracker: StepTracker, disabled: Set[str], fault: Fault | None, fail: Fail,
                          clock: Callable[[], float], before_step: Callable[[], bool],
                          check_limit: Callable[[], None] | None, health: Any,
                          safe_point: SafePoint | None = None,
                          sampling: BackwardSampling | None = None) -> Callable[[], None]:
    """Time every backward pass for the step tracker (probe/backward.py); returns the uninstaller.

    Its own instrument: a failing backward hook leaves the optimizer's step counter on.
    ``before_step`` runs before the tracker takes the pass until it returns True (the probe
    sends torch's environment once, there); ``health`` is the loss watch (probe/health.py) or None,
    and is handed the backward pass's outputs; ``safe_point`` the op sampler's pending
    change (probe/safe_point.py), made before the pass starts. ``clock`` is the step
    tracker's own (its readings go to ``tracker.on_backward``, compared with its steps' times).
    ``sampling`` is handed the engine switch: once the loop is steady the wrapper runs on
    sampled steps only (probe/backward_sampling.py).
    """
    from . import backward

    pending_env = [True]

    def on_backward(site: Any, start: float, end: float, reset: bool) -> None:
        if "backward" in disabled or "steps" in disabled:
            return
        if fault is not None:
            fault("backward")
            try:
                fault("steps")  # the step tracker's own fault, as in its optimizer hook
            except Exception as exc:
                fail("steps", exc)
                return
        if pending_env[0] and before_step():
            pending_env[0] = False
        tracker.on_backward(site, end, reset, start)
        if check_limit is not None:
            check_limit()  # SystemExit passes the wrapper's `except Exception`

    def on_outputs(outputs: Any) -> None:
        if "health" in disabled:
            return
        try:
            if fault is not None:
                fault("health")
            health.on_backward(outputs)
        except Exception as exc:
            fail("health", exc)

    def needs_site() -> bool:
        # the tracker takes no site into account once optimizer steps (or mpsprofiler.step())
        # count the steps, nor inside an optimizer step (StepTracker.on_backward), and its
        # mode never goes back: the call site and gradient bookkeeping are skipped there
        mode = tracker.mode
        return mode != "optimizer" and mode != "manual" and not tracker.in_optimizer

    engine = backward.install(on_backward, clock, lambda exc: fail("backward", exc),
                              on_outputs if health is not None else None, needs_site, safe_point)
    if sampling is not None:
        sampling.engine = engine
    return engine


def start_marker(tracker: StepTracker) -> Callable[[], None]:
    """Start step 0 at the first forward pass (a one-shot global hook), not at launch.

    Without it the first step would include the script's imports and setup. The first
    DataLoader fetch does the same for loops that load data before the forward pass.
    The probe removes the hook when ``torch.compile`` is first called (a global hook
    must never be seen by Dynamo, see ``compiling``); ``is_compiling`` keeps the body
    a no-op Dynamo can trace should any other Dynamo entry reach it.
    """
    from torch.nn.modules.module import register_module_forward_pre_hook

    from .compiling import is_compiling

    handle = None

    def first_forward(module: Any, args: Any) -> None:
        if is_compiling():
            return
        if handle is not None:
            handle.remove()
        tracker._mark_start()

    handle = register_module_forward_pre_hook(first_forward)
    return handle.remove
