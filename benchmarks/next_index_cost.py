"""What timing a loader's index draws (``_BaseDataLoaderIter._next_index``) adds per batch.

The probe times some batches' index draws (probe/loader_sites.py, ``LoaderSites.arm``) to
tell a slow sampler from a slow Dataset; its cost counts against issue 34's per-step
budget. A whole batch (collate included) varies by more than the cost on a busy machine,
so this times the draw alone, in one process and in rotated rounds: the bare draw (what a
batch not timed runs: ``LoaderSites.on_fetch`` adds one comparison) and the draw timed
(the iterator armed for it, as ``on_fetch`` does, then the draw through the stand-in). The
median over rounds of the difference is what a timed batch adds: every batch of a loader's
first ``INDEX_EXACT``, then one in ``INDEX_EVERY``.

    OMP_NUM_THREADS=1 python benchmarks/next_index_cost.py
"""

from __future__ import annotations

import itertools
import statistics
import time
from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

from mpsprofiler.probe import loader_sites


def main(rounds: int = 21, calls: int = 20000) -> None:
    loader = DataLoader(TensorDataset(torch.zeros(4, 2)), batch_sampler=itertools.repeat([0, 1]))  # type: ignore[arg-type]
    sites = loader_sites.LoaderSites(lambda d: None)
    sites.on_created(loader)
    it: Any = iter(loader)
    sites.on_iter(it, loader, None)
    it._num_yielded = 1  # past its first batch: its draws are timed
    entry = sites._iters[id(it)]
    arm = sites.arm

    def bare() -> float:
        t0 = time.perf_counter()
        for _ in range(calls):
            it._next_index()
        return (time.perf_counter() - t0) / calls * 1e6

    def timed() -> float:
        t0 = time.perf_counter()
        for _ in range(calls):
            arm(it, entry)
            it._next_index()
        return (time.perf_counter() - t0) / calls * 1e6

    results: dict[str, list[float]] = {"bare": [], "timed": []}
    for r in range(rounds):
        for name, fn in ((("bare", bare), ("timed", timed)) if r % 2 else (("timed", timed), ("bare", bare))):
            results[name].append(fn())
    assert entry[1].index_calls == rounds * calls
    extra = statistics.median(a - b for a, b in zip(results["timed"], results["bare"], strict=True))
    every = loader_sites.INDEX_EVERY
    print(f"bare draw: {statistics.median(results['bare']):.3f} µs")
    print(f"a timed draw adds {extra:.3f} µs (every batch of a loader's first {loader_sites.INDEX_EXACT})")
    print(f"past them, one draw in {every}: +{extra / every:.3f} µs per batch")


if __name__ == "__main__":
    main()
