"""One DataLoader per place the script builds it: a loader rebuilt every epoch is one loader.

A script that writes ``loader = DataLoader(...)`` inside its epoch loop (a new generator
seed per epoch, a curriculum) builds a new loader each epoch at the same line. The probe
records each construction (its own number, fetches and waits); counted apart, each held
one epoch's batches, so the loader that fed every step looked like "a side loader read in a
few steps only", its batches split across records, and two constructions at one line like
a helper building two different loaders ("changed there both would get the workers").

Constructions at the same line, called from the same place (``call_file``/``call_line``:
a helper's caller), over the same kind of dataset, with the same length, batch size and
workers (:func:`site_key`) are merged here into one record: the
first construction's settings, the counters summed, ``rebuilt`` (how many constructions)
and ``created_all`` (their construction numbers, which ``--set dataloader.N`` addresses).
"""

from __future__ import annotations

from typing import Any, cast

from ..events.payloads import DataLoaderFields

SUMMED = ("fetches", "fetch_s", "first_fetches", "first_fetch_s", "consumes", "consume_s", "index_calls", "index_s",
          "iters", "after_fetches", "after_fetch_s", "after_first_fetches", "after_first_fetch_s")
"""Counters of one construction's batches: the loader's are their sums."""


def site_key(d: DataLoaderFields) -> tuple[Any, ...] | None:
    """Where and over what the loader is built; None when the line is unknown (kept apart).

    Its length, batch size and workers too: a comprehension that builds the training and
    the validation loader at one line (``{s: make_loader(s) for s in splits}``) builds two
    loaders of different lengths, which must stay two; one rebuilt every epoch keeps its own.
    Its role too: a Trainer builds its training and its evaluation loader under the one
    ``trainer.train()`` line, over the same dataset and batch size where the script says so."""
    if not d.get("file") or not d.get("line"):
        return None
    return (d.get("file"), d.get("line"), d.get("call_file"), d.get("call_line"), d.get("dataset"), d.get("len"),
            d.get("batch_size"), d.get("num_workers"), d.get("role"))


def merge_rebuilt(records: dict[int, DataLoaderFields]) -> dict[int, DataLoaderFields]:
    """``records`` (by id, one per construction) with each site's constructions merged into
    its first one's id; a site built once keeps its record as it is."""
    groups: dict[Any, list[list[int]]] = {}
    for key in sorted(records, key=lambda k: (records[k].get("created") or 0, k)):
        site = site_key(records[key])
        chains = groups.setdefault(site if site is not None else ("id", key), [])
        if chains and _rebuilt_after(records[chains[-1][-1]], records[key]):
            chains[-1].append(key)
        else:
            chains.append([key])
    out: dict[int, DataLoaderFields] = {}
    for keys in (chain for chains in groups.values() for chain in chains):
        first = records[keys[0]]
        if len(keys) == 1:
            out[keys[0]] = first
            continue
        merged: dict[str, Any] = dict(first)
        for name in SUMMED:
            values = [records[k].get(name) for k in keys]
            numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
            if numbers:
                merged[name] = type(numbers[0])(sum(numbers))
        merged["rebuilt"] = len(keys)
        merged["created_all"] = sorted(int(c) for k in keys if isinstance(c := records[k].get("created"), int))
        out[keys[0]] = cast(DataLoaderFields, merged)
    return out


def _rebuilt_after(last: DataLoaderFields, new: DataLoaderFields) -> bool:
    """Whether ``new`` was built after ``last`` was first iterated (a rebuild, as an epoch
    loop's does), not beside it: two validation loaders made at one line together (a
    LightningDataModule's ``return [DataLoader(a), DataLoader(b)]``) are two loaders. A
    recording without the counts (before they were sent) merges as before."""
    by_then, created = last.get("created_by_then"), new.get("created")
    if not isinstance(by_then, int) or not isinstance(created, int):
        return True
    return created > by_then


def rebuilt_count(loader: DataLoaderFields) -> int:
    """How many times the script built this loader at its place (:func:`merge_rebuilt`): 1
    for a loader built once (or a damaged record's value)."""
    n = loader.get("rebuilt")
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 1 else 1


def dataset_text(loader: DataLoaderFields) -> str | None:
    """The dataset column of the views: ``Slow``, or ``Slow (built 8x)`` for a loader the
    script builds anew every epoch."""
    name = loader.get("dataset")
    n = rebuilt_count(loader)
    if n > 1:
        return f"{name or '?'} (built {n}x)"
    return name if isinstance(name, str) else None
