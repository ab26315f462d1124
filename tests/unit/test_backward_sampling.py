"""Which steps' backward passes the wrapper sees once the loop is steady
(probe/backward_sampling.py), driven step by step with a stand-in engine switch."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from mpsprofiler.probe.backward_sampling import EVERY, WARM_STEPS, BackwardSampling, stop_sampling
from mpsprofiler.probe.health import fallback_sampled, next_fallback_sampled
from mpsprofiler.probe.safe_point import SafePoint


class _Engine:
    def __init__(self) -> None:
        self.wrapped = True
        self.swaps = 0
        self.calls = 0

    def wrap(self) -> None:
        self.swaps += not self.wrapped
        self.wrapped = True

    def bare(self) -> None:
        self.swaps += self.wrapped
        self.wrapped = False


def _loop(steps: int, mode: str = "optimizer", health: Any = None, safe: SafePoint | None = None,
          pending_at: set[int] = frozenset(), extra: Any = None, per_step: int = 1,  # type: ignore[assignment]
          gated: bool = False) -> tuple[list[int], _Engine]:
    """The steps whose passes ran wrapped; ``per_step`` optimizers step in an iteration;
    ``gated``: ``on_step`` called as the optimizer hook calls it (step_hooks.py), only from
    ``call_at`` on or with a safe point pending (the engine's ``calls`` counts them)."""
    tracker = SimpleNamespace(index=0, mode=mode)
    sampling = BackwardSampling(tracker, safe, health)  # type: ignore[arg-type]
    sampling.extra_next = extra
    engine = sampling.engine = _Engine()
    wrapped = []
    for i in range(steps):
        tracker.index = i
        if engine.wrapped:
            wrapped.append(i)
            if safe is not None:
                safe.run()  # the wrapper's safe point, at the step's pass
        for k in range(per_step):
            tracker.index = i + 1 if k == per_step - 1 else i
            if safe is not None and tracker.index in pending_at:
                # the op sampler's boundary listener, inside the tracker's step (before the swap)
                safe.set(lambda: None, lambda exc: None)
            if not gated or tracker.index >= sampling.call_at or sampling.safe.pending is not None:
                engine.calls += 1
                sampling.on_step()
            assert sampling.bare_next == (not engine.wrapped)  # what the hook tells the loss watch by
    return wrapped, engine


def test_every_step_until_steady_then_one_in_every():
    wrapped, engine = _loop(300)
    assert wrapped[:WARM_STEPS + 1] == list(range(WARM_STEPS + 1))
    later = [i for i in wrapped if i > WARM_STEPS]
    assert later == list(range(WARM_STEPS + EVERY, 300, EVERY))
    assert EVERY % 2 and EVERY % 5  # walks through a script's periodic work (sample_phase)
    assert engine.swaps == 2 * len(later) + 1  # two swaps a sample, and the first one out


def test_loops_counted_from_backward_passes_keep_every_pass():
    assert _loop(300, mode="backward")[0] == list(range(300))
    assert _loop(300, mode="none")[0] == list(range(300))


def test_manual_steps_are_sampled_too():
    assert len(_loop(300, mode="manual")[0]) < 150


def test_steady_waits_for_a_finite_loss_or_twice_the_warm_up():
    unread = SimpleNamespace(done=False, last_finite=None, sampled_from=None)
    wrapped, _ = _loop(300, health=unread)
    assert wrapped[:2 * WARM_STEPS + 1] == list(range(2 * WARM_STEPS + 1))
    assert unread.sampled_from == 2 * WARM_STEPS + 1
    read = SimpleNamespace(done=False, last_finite=(3, 0.5), sampled_from=None)
    _loop(300, health=read)
    assert read.sampled_from == WARM_STEPS + 1  # the loss check learns from which step it samples


def test_a_pending_safe_point_or_a_needed_step_is_always_wrapped():
    safe = SafePoint()
    pending = {100, 101, 150, 233}
    wrapped, _ = _loop(300, safe=safe, pending_at=pending)
    assert pending <= set(wrapped)
    wrapped, _ = _loop(1100, extra=next_fallback_sampled)
    assert {128, 256, 512, 768, 1024} <= set(wrapped)


def test_next_fallback_sampled_is_the_fallback_schedule():
    picked = [i for i in range(3000) if fallback_sampled(i)]
    assert all(next_fallback_sampled(i) == min(p for p in picked if p >= i) for i in range(2800))


def test_several_optimizers_decide_once_a_step():
    one, _ = _loop(300)
    gan, _ = _loop(300, per_step=2)
    assert gan == one


def test_the_optimizer_hook_calls_on_step_only_where_it_has_work():
    """Issue 34: the hook tests ``call_at`` and the pending safe point itself; the steps
    wrapped are those of a call at every step, in every kind of loop above."""
    cases: list[dict[str, Any]] = [{}, {"per_step": 2}, {"mode": "manual"}, {"mode": "backward"},
                                   {"extra": next_fallback_sampled},
                                   {"health": SimpleNamespace(done=False, last_finite=None, sampled_from=None)}]
    for kwargs in cases:
        every, _ = _loop(1100, **kwargs)
        gated, engine = _loop(1100, gated=True, **kwargs)
        assert gated == every, kwargs
        if kwargs.get("mode") != "backward" and "health" not in kwargs:
            assert engine.calls < 1100 / 2  # (the warm-up's 64, then two calls a sample)
    pending = {100, 101, 150, 233}
    every, _ = _loop(300, safe=SafePoint(), pending_at=pending)
    gated, _ = _loop(300, safe=SafePoint(), pending_at=pending, gated=True)
    assert gated == every and pending <= set(gated)


def test_stop_wraps_every_pass_again():
    tracker = SimpleNamespace(index=0, mode="optimizer")
    sampling = BackwardSampling(tracker, None)  # type: ignore[arg-type]
    engine = sampling.engine = _Engine()
    for i in range(1, 200):
        tracker.index = i
        sampling.on_step()
    stop_sampling(sampling)
    assert engine.wrapped
    for i in range(200, 400):
        tracker.index = i
        sampling.on_step()
        assert engine.wrapped
    stop_sampling(None)  # nothing to stop


def test_the_engine_switch_swaps_torchs_own_function(monkeypatch):
    """backward.Engine: torch's own function between sampled steps, the wrapper on them,
    a name someone else patched meanwhile left alone, nothing swapped in after uninstall."""
    import torch
    import torch.autograd as autograd
    import torch.autograd.graph as graph

    from mpsprofiler.probe import backward

    original = autograd._engine_run_backward
    seen: list[Any] = []
    engine = backward.install(lambda site, start, end, reset: seen.append(end - start), lambda: 0.0,
                              lambda exc: None)
    try:
        assert autograd._engine_run_backward is not original and graph._engine_run_backward is not original
        x = torch.ones(2, requires_grad=True)
        (x * 2).sum().backward()
        assert len(seen) == 1
        engine.bare()
        assert autograd._engine_run_backward is original and graph._engine_run_backward is original
        (x * 2).sum().backward()
        assert len(seen) == 1  # torch's own: nothing of ours ran
        other = object()
        monkeypatch.setattr(graph, "_engine_run_backward", other)
        engine.wrap()
        assert graph._engine_run_backward is other  # someone else's: left to them
        assert autograd._engine_run_backward is not original
        monkeypatch.setattr(graph, "_engine_run_backward", original)
    finally:
        engine()
    assert autograd._engine_run_backward is original and graph._engine_run_backward is original
    engine.wrap()
    assert autograd._engine_run_backward is original  # uninstalled for good
