"""The probe times a loader's index draws (``_next_index``: its sampler, in the training
process) apart from the batch: a slow sampler is not a slow Dataset, and workers cannot
take it over (probe/loader_sites.py). Real DataLoaders, in-process, through the probe's hooks."""

from __future__ import annotations

import gc
import time
import weakref
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, Sampler, TensorDataset

from mpsprofiler import events
from mpsprofiler.devices.cpu import CpuBackend
from mpsprofiler.probe import loader_hooks, loader_sites
from mpsprofiler.probe.steps import StepTracker

SLEEP_S = 0.004


class SlowBatches(Sampler[list[int]]):
    def __init__(self, n: int, batch_size: int, sleep_s: float) -> None:
        self.n, self.batch_size, self.sleep_s = n, batch_size, sleep_s

    def __len__(self) -> int:
        return self.n // self.batch_size

    def __iter__(self) -> Iterator[list[int]]:
        for start in range(0, self.n, self.batch_size):
            time.sleep(self.sleep_s)
            yield list(range(start, start + self.batch_size))


class SlowItems(Dataset):
    def __init__(self, n: int, sleep_s: float) -> None:
        self.n, self.sleep_s = n, sleep_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        time.sleep(self.sleep_s)
        return torch.zeros(2)


def _run(make: Any, passes: int = 1, workers: bool = False) -> tuple[dict[str, Any], list[Any]]:
    """Iterate the loader ``make()`` builds under the probe's DataLoader hooks: (its last
    ``dataloader`` event, the iterators' weak references)."""
    sent: list[dict[str, Any]] = []
    tracker = StepTracker(lambda kind, **payload: None, CpuBackend(), time.perf_counter)
    sites, _, uninstall = loader_hooks.install(
        tracker, set(), lambda kind, **d: sent.append(d) if kind == events.KIND_DATALOADER else None,
        None, lambda name, exc: pytest.fail(f"{name}: {exc!r}"), None, lambda: "cpu")
    refs = []
    try:
        loader = make()
        for _ in range(passes):
            it = iter(loader)
            refs.append(weakref.ref(it))
            for _batch in it:
                pass
            if not workers:  # (workers end a pass without a last draw: the stand-in waits, weakly)
                assert "_next_index" not in vars(it)  # the pass's last draw took the stand-in away
            del it, _batch
        sites.flush()
    finally:
        uninstall()
    return sent[-1], refs


def test_a_slow_batch_samplers_draws_are_timed_apart_from_the_batch() -> None:
    data = TensorDataset(torch.zeros(64, 2))
    last, _ = _run(lambda: DataLoader(data, batch_sampler=SlowBatches(64, 4, SLEEP_S)))
    # 16 batches: the first is not timed, the second's draw comes before any timed fetch,
    # the pass's end (StopIteration) adds nothing
    assert last["fetches"] == 15 and last["index_calls"] == 14, last
    per_draw, per_fetch = last["index_s"] / last["index_calls"], last["fetch_s"] / last["fetches"]
    assert per_draw >= SLEEP_S * 0.9
    assert per_draw <= per_fetch * 1.5  # a draw is a part of its fetch
    assert last["batch_sampler"] == "SlowBatches"


def test_a_slow_getitems_draws_are_cheap() -> None:
    last, _ = _run(lambda: DataLoader(SlowItems(64, SLEEP_S / 4), batch_size=4, shuffle=True))
    assert last["index_calls"] == 14
    assert last["index_s"] / last["index_calls"] < SLEEP_S / 4  # the wait is the Dataset's
    assert last["fetch_s"] / last["fetches"] >= SLEEP_S * 0.9
    assert (last["batch_sampler"], last["sampler"]) == ("BatchSampler", "RandomSampler")


def test_a_slow_plain_sampler_is_timed_through_torchs_batch_sampler() -> None:
    class SlowOrder(Sampler[int]):
        def __len__(self) -> int:
            return 32

        def __iter__(self) -> Iterator[int]:
            for i in range(32):
                time.sleep(SLEEP_S / 4)
                yield i

    last, _ = _run(lambda: DataLoader(TensorDataset(torch.zeros(32, 2)), batch_size=4, sampler=SlowOrder()))
    assert last["index_s"] / last["index_calls"] >= SLEEP_S * 0.9  # 4 indices a batch
    assert last["sampler"] == "SlowOrder"


def test_with_workers_the_draws_still_run_in_the_training_process() -> None:
    data = TensorDataset(torch.zeros(48, 2))
    last, _ = _run(lambda: DataLoader(data, batch_sampler=SlowBatches(48, 4, SLEEP_S), num_workers=2),
                   workers=True)
    assert last["index_calls"] >= 5, last
    assert last["index_s"] / last["index_calls"] >= SLEEP_S * 0.9


def test_past_the_first_draws_one_in_every_few_is_timed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader_sites, "INDEX_EXACT", 4)
    monkeypatch.setattr(loader_sites, "INDEX_EVERY", 5)
    last, _ = _run(lambda: DataLoader(TensorDataset(torch.zeros(40, 2)), batch_size=1))
    # timed fetches 1..39 arm the next draw at 1, 2, 3 (< 4), 5, 10, 15, 20, 25, 30, 35
    assert last["fetches"] == 39 and last["index_calls"] == 10, last


def test_persistent_workers_next_pass_draws_its_first_indices_untimed() -> None:
    """iter() on a loader with persistent workers resets its iterator, which draws the
    workers' first indices outside any wait: a sampler's per-epoch set-up is not a draw."""
    data = TensorDataset(torch.zeros(48, 2))
    last, _ = _run(lambda: DataLoader(data, batch_sampler=SlowBatches(48, 4, 0.0), num_workers=1,
                                      persistent_workers=True), passes=2, workers=True)
    assert 0 < last["index_calls"] <= last["fetches"], last


def test_a_timed_iterator_is_freed_without_the_garbage_collector() -> None:
    """The stand-in holds its iterator weakly: a dropped iterator (with workers, their
    processes) goes at once, not at the collector's next run."""
    gc.disable()
    try:
        _, refs = _run(lambda: DataLoader(TensorDataset(torch.zeros(12, 2)), batch_size=2), passes=2)
        assert all(ref() is None for ref in refs)
    finally:
        gc.enable()
