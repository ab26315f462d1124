"""Each pass's first batch is summed apart per loader (``first_fetches``/``first_fetch_s``,
probe/loader_sites.py): it holds starting the pass's workers, which with non-persistent
workers happens at every pass, and a run of several loaders is judged on each one's own
(diagnosis/analyzers/loader_restarts.py). Real DataLoaders, in-process, through the probe's hooks."""

from __future__ import annotations

import time
from collections.abc import Iterator

import torch
from torch.utils.data import DataLoader, Sampler, TensorDataset

from tests.unit.test_loader_index_timing import _run

SETUP_S = 0.02


class SlowStart(Sampler[list[int]]):
    """Batches of 4 whose every pass begins with a set-up (as a worker's start-up would)."""

    def __len__(self) -> int:
        return 8

    def __iter__(self) -> Iterator[list[int]]:
        time.sleep(SETUP_S)
        for start in range(0, 32, 4):
            yield list(range(start, start + 4))


def test_each_passs_first_batch_is_summed_apart_from_the_others() -> None:
    data = TensorDataset(torch.zeros(32, 2))
    last, _ = _run(lambda: DataLoader(data, batch_sampler=SlowStart()), passes=3)
    assert last["iters"] == 3 and last["first_fetches"] == 3 and last["fetches"] == 3 * 7, last
    assert last["first_fetch_s"] / last["first_fetches"] >= SETUP_S * 0.9, last
    # the set-up is in no other fetch: indexing 4 rows of memory takes microseconds each
    assert last["fetch_s"] / last["fetches"] < last["first_fetch_s"] / last["first_fetches"], last
