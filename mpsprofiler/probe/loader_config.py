"""A DataLoader's configuration as the probe records it, read without running the script's code.

The probe must not call what the DataLoader itself would not (a user ``__len__``), so
each figure is read from attributes torch sets, or left out.
"""

from __future__ import annotations

import threading
from typing import Any

from ..events.payloads import DataLoaderFields


def loader_config(loader: Any, number: int) -> DataLoaderFields:
    length = _batches(loader)
    dataset = getattr(loader, "dataset", None)
    sampler = getattr(loader, "batch_sampler", None)
    return {
        "id": number,
        "batch_size": _batch_size(loader, sampler),
        "num_workers": getattr(loader, "num_workers", None),
        "pin_memory": bool(getattr(loader, "pin_memory", False)),
        "prefetch_factor": getattr(loader, "prefetch_factor", None),
        "persistent_workers": bool(getattr(loader, "persistent_workers", False)),
        "len": length,
        "dataset": type(dataset).__name__ if dataset is not None else None,
        "iterable": _iterable(dataset),
        "iterable_split": _splits_by_worker(dataset, loader),
        "batch_sampler": type(sampler).__name__ if sampler is not None else None,
        "sampler": _name(getattr(loader, "sampler", None)),
        "batch_sampler_at": _iter_at(sampler),
        "sampler_at": _iter_at(getattr(loader, "sampler", None)),
        "multiprocessing_context": _ctx_name(loader),
        "start_method_set": _start_method_set(),
        "thread": threading.current_thread().name,
    }


def _start_method_set() -> str | None:
    """The start method the script fixed for the process (``set_start_method("spawn")``, as
    CUDA scripts do), or None where it left the platform's default: a loader without workers
    gets them by this method once a fix gives it some, which the advice prices (start-up)."""
    import multiprocessing

    try:
        return multiprocessing.get_start_method(allow_none=True)
    except Exception:
        return None


def _name(obj: Any) -> str | None:
    return type(obj).__name__ if obj is not None else None


def _iter_at(sampler: Any) -> list[Any] | None:
    """``[file, line]`` of the ``__iter__`` of a sampler class of the script's own (not
    torch's): where a sampler that draws its indices slowly does its work, which the stall
    finding names. Read from the function's code object, so nothing of the script runs;
    None for torch's samplers, a builtin, or anything unreadable."""
    try:
        fn = getattr(type(sampler), "__iter__", None)
        code = getattr(fn, "__code__", None)
        if sampler is None or code is None or _torch_owned(fn):
            return None
        return [str(code.co_filename), int(code.co_firstlineno)]
    except Exception:
        return None


def _iterable(dataset: Any) -> bool:
    """An ``IterableDataset``: each worker runs its own copy of ``__iter__`` (the advice says
    so before suggesting more than one worker)."""
    try:
        from torch.utils.data import IterableDataset

        return isinstance(dataset, IterableDataset)
    except Exception:
        return False


def _splits_by_worker(dataset: Any, loader: Any) -> bool:
    """Whether an ``IterableDataset`` gives each worker its own share of the stream, as the
    DataLoader docs show it: a method of its class calls ``get_worker_info()`` (its name is
    in the code's names, nested functions included), or the loader has a
    ``worker_init_fn`` (the docs' other way: it sets each worker's copy's range). Read from
    code objects: nothing of the script's runs."""
    try:
        if getattr(loader, "worker_init_fn", None) is not None:
            return True
        for cls in type(dataset).__mro__:
            if cls.__module__.startswith("torch.") or cls is object:
                continue
            for value in list(vars(cls).values()):
                code = getattr(value, "__code__", None)
                if code is not None and _names_worker_info(code, 0):
                    return True
    except Exception:
        pass
    return False


def _names_worker_info(code: Any, depth: int) -> bool:
    if "get_worker_info" in code.co_names:
        return True
    return depth < 3 and any(_names_worker_info(c, depth + 1) for c in code.co_consts if hasattr(c, "co_names"))


def _batch_size(loader: Any, sampler: Any) -> int | None:
    """The loader's batch size, or its batch sampler's: ``accelerator.prepare`` (so every
    Hugging Face Trainer) rebuilds a loader with ``batch_sampler=`` and torch then sets
    ``batch_size`` to None ("a batch of None samples"). None: the loader does not batch."""
    size = getattr(loader, "batch_size", None)
    if size is None and sampler is not None:
        size = getattr(sampler, "batch_size", None)
    return size if isinstance(size, int) and not isinstance(size, bool) else None


def _batches(loader: Any) -> int | None:
    """``len(loader)`` when that calls no code of the script's that the DataLoader would
    not call itself, else None.

    ``DataLoader.__len__`` on an IterableDataset calls the dataset's ``__len__`` (which
    plain iteration never does) and sets ``_IterableDataset_len_called``, after which
    torch warns when the dataset yields more; a sampler of the script's own may have a
    costly or side-effecting ``__len__``. torch's own samplers are asked (their
    ``__len__`` reads the dataset's length, which ``SequentialSampler`` and
    ``RandomSampler`` read anyway to iterate), nothing else is.
    """
    try:
        from torch.utils.data import IterableDataset, Sampler

        if isinstance(getattr(loader, "dataset", None), IterableDataset):
            return None
        if type(loader).__len__ is not _dataloader_len():
            return None  # a DataLoader subclass with a length of its own
        sampler = getattr(loader, "_index_sampler", None)
        while sampler is not None:
            if not isinstance(sampler, Sampler) or not _torch_owned(getattr(type(sampler), "__len__", None)):
                return None
            inner = getattr(sampler, "sampler", None)
            if inner is None or inner is sampler:
                break
            sampler = inner
        if sampler is None:
            return None
        return int(len(loader))
    except Exception:
        return None


def _dataloader_len() -> Any:
    from torch.utils.data import DataLoader

    return DataLoader.__len__


def _torch_owned(fn: Any) -> bool:
    module = getattr(fn, "__module__", "") or ""
    return module == "torch" or module.startswith("torch.")


def _ctx_name(loader: Any) -> str | None:
    ctx = getattr(loader, "multiprocessing_context", None)
    if ctx is None:
        if getattr(loader, "num_workers", 0):
            import multiprocessing

            return multiprocessing.get_start_method(allow_none=True) or None
        return None
    return getattr(ctx, "_name", None) or str(ctx)
