"""The frameworks people train with: Lightning, the Hugging Face Trainer and accelerate.

Steps are counted as the framework counts them (its optimizer steps, not the batches its
loaders fetch ahead, nor Lightning's sanity check). The tracker's rules are pinned down
on scripted calls first (no library needed); the real libraries, where installed (the
``frameworks`` extra), run tiny models built from configs (random weights, synthetic
data, no download) through the real CLI, a few runs shared by the tests.
"""

from __future__ import annotations

from typing import Any

from mpsprofiler.devices.cpu import CpuBackend
from mpsprofiler.probe.steps import PROVISIONAL, StepTracker


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def tracker() -> tuple[StepTracker, Clock, list[dict[str, Any]]]:
    clock = Clock()
    sent: list[dict[str, Any]] = []
    return StepTracker(lambda kind, **payload: sent.append(payload), CpuBackend(), clock), clock, sent


def fetch(t: StepTracker, clock: Clock, wait: float = 0.01, got: bool = True) -> None:
    started = t.on_fetch_start()
    clock.t += wait
    t.on_fetch_end(started, got)


class Opt:
    """An optimizer as the step hook sees it: its parameter groups."""

    def __init__(self, *params: object) -> None:
        self.param_groups = [{"params": list(params)}]


def steps_of(sent: list[dict[str, Any]]) -> list[int]:
    return [i for payload in sent for i in payload["i"]]


def test_batches_fetched_ahead_of_the_first_step_are_not_steps() -> None:
    """accelerate's look-ahead, a Trainer's accumulation window (4 batches fetched
    before the first forward) and the DataLoaderShard's one-ahead: 5 fetches before the
    first backward pass; 10 optimizer steps are 10 steps, and the held batches' wait
    stays in step 0."""
    t, clock, sent = tracker()
    listened: list[int] = []
    t.listeners.append(lambda i, dur: listened.append(i))
    w = Opt(object())
    for _ in range(5):
        fetch(t, clock)
    t.drain()
    assert sent == []  # held: not yet known to be steps
    assert listened == []
    for step in range(10):
        if step:
            for _ in range(4):
                fetch(t, clock)
        clock.t += 0.01
        t.on_backward("site", clock.t)
        t.on_optimizer_step(w)
    t.finish()
    t.drain()
    assert steps_of(sent) == list(range(10))
    assert t.retracted == 4
    assert abs(sent[0]["wait"][0] - 0.05) < 1e-9 and sent[0]["batches"][0] == 5
    assert listened == list(range(1, 11))


def test_sanity_check_batches_then_training() -> None:
    """Lightning's 2 sanity-check validation batches (fetch, forward, fetch, forward,
    end of loader), then training with an optimizer step per batch."""
    t, clock, sent = tracker()
    w = Opt(object())
    fetch(t, clock)
    fetch(t, clock)
    fetch(t, clock, got=False)
    for _ in range(6):
        fetch(t, clock)
        t.on_backward("site", clock.t)
        t.on_optimizer_step(w)
    t.finish()
    t.drain()
    assert len(steps_of(sent)) == 6


def test_a_loop_without_training_still_counts_its_batches() -> None:
    """Inference: every batch after the first is a step; past PROVISIONAL they are sent
    as they come, and the listeners (the op sampler, --max-steps) hear of them."""
    t, clock, sent = tracker()
    listened: list[int] = []
    t.listeners.append(lambda i, dur: listened.append(i))
    for _ in range(PROVISIONAL + 10):
        fetch(t, clock)
    t.drain()
    assert len(steps_of(sent)) == PROVISIONAL + 9
    assert listened[0] == PROVISIONAL and listened[-1] == PROVISIONAL + 9
    t2, clock2, sent2 = tracker()
    for _ in range(4):
        fetch(t2, clock2)
    t2.finish()
    t2.drain()
    assert steps_of(sent2) == [0, 1, 2] and t2.mode == "dataloader"


def test_an_optimizer_built_every_step_is_one_optimizer() -> None:
    """A new SGD each iteration over the same parameters (CPython reuses the freed one's
    address, so ids alternate or repeat): each step() is a step; a GAN's two optimizers
    over different parameters are still one step together."""
    t, clock, sent = tracker()
    param = object()
    for _ in range(12):
        clock.t += 0.01
        t.on_optimizer_step(Opt(param))
    t.finish()
    t.drain()
    assert len(steps_of(sent)) == 12
    t2, clock2, sent2 = tracker()
    g, d = object(), object()
    for _ in range(6):
        clock2.t += 0.01
        t2.on_optimizer_step(Opt(d))
        t2.on_optimizer_step(Opt(g))
    t2.finish()
    t2.drain()
    assert len(steps_of(sent2)) == 6
