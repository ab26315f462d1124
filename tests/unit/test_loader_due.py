"""The per-batch path of the loader sums (loader_sites.LoaderSites.on_fetch, issue 34) checks
one count per batch (``Site.due``) for the index draws timed (a loader's first
``INDEX_EXACT`` timed batches, then every ``INDEX_EVERY``-th); the fold of the logged
batches (``LoaderSites.fold``, the channel thread's, here at times between batches) sends
the updates (at ``FIRST_UPDATE`` timed batches, then 2x, 4x, ...). These are the batches
they act at, exactly, and a loader whose fields come late sends its update at the next
batch. (The same lists as the check at every batch that ``due`` replaced, ec275c6's, gives.)"""

from __future__ import annotations

from typing import Any

from mpsprofiler.probe import loader_sites
from mpsprofiler.probe.loader_sites import FIRST_UPDATE, INDEX_EVERY, INDEX_EXACT, LoaderSites, Site


class _It:
    def __init__(self) -> None:
        self._num_yielded = 0


class _Loader:
    pass


def _drive(batches: int, fields_at: int = 0) -> tuple[list[int], list[int]]:
    """Timed batch numbers at which an index draw was armed, and the fetch counts sent."""
    sent: list[dict[str, Any]] = []
    sites = LoaderSites(sent.append, lambda: 0)
    loader = _Loader()
    sites._sites[loader] = Site(1, "train.py", 3)
    it = _It()
    sites.on_iter(it, loader, {"created": 1} if fields_at == 0 else None)
    armed: list[int] = []
    for k in range(batches + 1):  # the iterator's first batch is not timed
        if fields_at and k == fields_at:
            sites.on_iter(_It(), loader, {"created": 1})  # a later iterator brings the fields
        it._num_yielded += 1
        sites.on_fetch(it, 0.001, (0, 1), float(k))
        if it.__dict__.pop("_next_index", None) is not None:
            armed.append(k)
        if k % 97 == 0:
            sites.fold()  # as the channel thread does, at times between batches
    sites.fold()
    return armed, [int(row["fetches"]) for row in sent]


def test_index_draws_and_updates_at_exactly_their_batches() -> None:
    n = 5_000
    armed, updates = _drive(n)
    assert armed == [k for k in range(1, n + 1) if k < INDEX_EXACT or not k % INDEX_EVERY]
    expected, at = [], FIRST_UPDATE
    while at <= n:
        expected.append(at)
        at *= 2
    assert updates == expected


def test_fields_that_come_late_send_the_update_at_the_next_batch() -> None:
    armed, updates = _drive(1_000, fields_at=300)
    assert armed == [k for k in range(1, 1_001) if k < INDEX_EXACT or not k % INDEX_EVERY]
    # due since the 16th timed batch: sent at the 300th, and (the count doubling once a batch,
    # 16 -> 32 -> ... -> 512) at the next four, as a check at every batch sends them
    assert updates == [300, 301, 302, 303, 304, 512]
    assert loader_sites.Site(1, None, None).due == 0  # a new loader checks at its first timed batch
